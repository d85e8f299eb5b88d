// StreamCore's producer thread: the loop that hands each queued item to its
// voice's executor (StreamVoice::begin(), then step() unit by unit) or,
// for a mark or break, speaks it itself; and the VoiceSink side through
// which every executor writes into the PlaybackRing and plans its words'
// marks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <utility>

#include "engine/scheduling/deadline.h"
#include "engine/scheduling/engine_workers.h"
#include "engine/streams/stream_core.h"
#include "engine/streams/stream_core_detail.h"
#include "engine/utf8.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {
namespace {

using stream_core_detail::seconds_since;

// A mark's name into `mark`: one cut short at kMaxName bytes is cut at a
// character's start (a word can be long); the rest of `mark.name` stays
// zero, so it ends with a NUL.
void copy_mark_name(std::string_view name, SpeechMark& mark) {
    const std::size_t n =
        utf8::char_start_at_or_before(name, std::min(name.size(), SpeechMark::kMaxName));
    name.copy(mark.name, n);
}

// How often a producer blocked on a full ring rechecks it: a real-time
// reader never signals (it must not), so the writer polls.
constexpr auto kSpacePoll = std::chrono::milliseconds(1);

}  // namespace

// ---- producer thread --------------------------------------------------------

void StreamCore::produce() {
    // From the last cancel acknowledged, not the ring's generation now: a
    // cancel() that came before this thread first ran (a server cancels a
    // stream it has just opened when its client is already gone) must still
    // be acknowledged, or read() waits for that forever.
    seen_generation_ = ring_.acknowledged_generation();
    for (;;) {
        // Outside mu_: a thread stepped down must not hold a lock that
        // real-time threads wait for while it waits for the CPU.
        if (offline_reader_.load(std::memory_order_relaxed) && !producer_background_) {
            // Behind the front end and every stream someone hears. The CPU
            // backend's helpers take on its policy, not its nice value.
            producer_background_ = rt::make_current_thread_background(rt::kOfflineNice);
            producer_realtime_ = producer_realtime_ && !producer_background_;
        }
        std::unique_lock lock(mu_);
        producer_busy_ = false;
        work_cv_.wait(lock, [&] {
            return shutdown_ || !queue_.empty() || ring_.generation() != seen_generation_;
        });
        if (shutdown_) return;
        if (acknowledge_cancel()) continue;
        // read() came while this thread waited: step down (outside mu_,
        // at the top of the loop) before the item, not after it.
        if (offline_reader_.load(std::memory_order_relaxed) && !producer_background_) continue;
        WorkItem item = take_next_item();
        if (auto* marker = std::get_if<std::shared_ptr<SpeechMarker>>(&item)) {
            lock.unlock();
            engine_->wake(*this);  // room in the look-ahead for the next analysis
            finish_item(speak_marker(**marker), 0.0, false);
            continue;
        }
        // A sentence a render worker may be making ahead is settled first.
        if (auto* u = std::get_if<std::shared_ptr<AnalysedSentence>>(&item))
            if (!claim(**u, lock)) return;
        const ItemOrigin& origin =
            std::visit([](const auto& i) -> const ItemOrigin& { return i->origin; }, item);
        first_audio_due_ = voice_->holds_analysis_until_first_audio() && origin.first_of_push;
        lock.unlock();
        engine_->wake(*this);  // room for more look-ahead
        first_audio_pending_ = true;
        // Its units one after another (StreamVoice::step()).
        voice_->begin(item);
        Spoken spoken;
        double compute_seconds = 0.0;
        do {
            spoken = voice_->step();
            compute_seconds += spoken.compute_seconds;
        } while (spoken.more);
        finish_item(spoken.complete, compute_seconds);
    }
}

bool StreamCore::acknowledge_cancel() {
    const auto gen = ring_.generation();
    if (gen == seen_generation_) return false;
    seen_generation_ = gen;
    voice_->reset();
    ring_.acknowledge(gen);
    notify_readers();  // an offline reader waits for this (read())
    return true;
}

WorkItem StreamCore::take_next_item() {
    WorkItem item = std::move(queue_.front());
    queue_.pop_front();
    producer_busy_ = true;
    const std::uint64_t item_samples = estimated_samples(item);
    queued_samples_ -= std::min(queued_samples_, item_samples);
    current_end_pos_ = ring_.write_position() + item_samples;
    if (std::holds_alternative<std::shared_ptr<SpeechMarker>>(item)) --markers_waiting_;
    return item;
}

// A sentence a render worker is still making is taken over and scheduled
// block by block: the producer gets here once the previous sentence is in
// the ring, so the worker is late, and waiting for it had no deadline and
// no fallback (with both cores loaded the ring ran dry at the sentence
// boundary; the workers run at normal priority). One it has finished is
// copied (its state says which: FliteStreamVoice::step()).
bool StreamCore::claim(AnalysedSentence& u, std::unique_lock<std::mutex>& lock) {
    if (u.state == AnalysedSentence::WorkerRendering)
        u.taken_over.store(true, std::memory_order_relaxed);
    if (u.state == AnalysedSentence::Pending || u.state == AnalysedSentence::WorkerRendering) {
        u.state = AnalysedSentence::Scheduled;
        return true;
    }
    work_cv_.wait(lock, [&] {
        return shutdown_ || u.state == AnalysedSentence::Rendered ||
               u.state == AnalysedSentence::Abandoned || ring_.cancelled(u.origin.generation);
    });
    return !shutdown_;
}

std::uint64_t StreamCore::estimated_samples(const WorkItem& item) const {
    if (const auto* marker = std::get_if<std::shared_ptr<SpeechMarker>>(&item))
        return (*marker)->silence_samples;
    return voice_->estimated_samples(item);
}

void StreamCore::queue_mark(const MarkRecord& mark) {
    if (marks_.write(std::span<const MarkRecord>(&mark, 1)) == 1)
        marks_reached_.add();
    else
        marks_dropped_.add();
}

void StreamCore::record_mark(std::string_view name, SpeechMark::Kind kind, std::uint64_t sample,
                             std::uint64_t generation) {
    MarkRecord r;
    r.generation = generation;
    copy_mark_name(name, r.mark);
    r.mark.kind = kind;
    r.mark.sample = sample;
    queue_mark(r);
}

void StreamCore::plan_word(std::string_view text, std::uint64_t start, double offset,
                           std::uint64_t generation) {
    MarkRecord r;
    r.generation = generation;
    copy_mark_name(text, r.mark);
    r.mark.kind = SpeechMark::Word;
    r.mark.sample = start + static_cast<std::uint64_t>(std::llround(offset));
    pending_words_.push_back(r);
}

// Before the audio from the write position to `end` goes into the ring: a
// consumer that reads it finds the marks of the words it holds queued.
void StreamCore::mark_words_before(std::uint64_t end) {
    while (!pending_words_.empty() && pending_words_.front().mark.sample < end) {
        queue_mark(pending_words_.front());
        pending_words_.pop_front();
    }
}

// A mark is recorded at the ring position the audio before it has reached,
// the consumer's position when it is heard; a break writes its silence.
bool StreamCore::speak_marker(const SpeechMarker& m) {
    if (ring_.cancelled(m.origin.generation)) return false;
    if (!m.mark.empty()) {
        record_mark(m.mark, SpeechMark::Named, ring_.write_position(), m.origin.generation);
        mark_end_if_last(0);
        return true;
    }
    std::vector<float> zeros(std::min<std::size_t>(m.silence_samples, 4096), 0.0f);
    for (std::size_t left = m.silence_samples; left > 0;) {
        const std::size_t n = std::min(left, zeros.size());
        left -= n;
        if (!write(std::span<const float>(zeros.data(), n), m.origin, left == 0)) return false;
    }
    if (m.silence_samples == 0) mark_end_if_last(0);
    return true;
}

void StreamCore::note_unspeakable(std::string reason) {
    std::lock_guard lock(mu_);
    ++sentences_unspeakable_;
    unspeakable_reason_ = std::move(reason);
}

void StreamCore::finish_item(bool complete, double vocoder_seconds, bool sentence) {
    pending_words_.clear();  // words of audio that was not written: never heard
    std::unique_lock lock(mu_);
    vocoder_seconds_ += vocoder_seconds;
    current_end_pos_ = 0;  // its audio is all written (or dropped): the ring says where it ended
    // A sentence that ended without audio (cancelled, or a device error)
    // holds the next analysis back no longer. (wake() after unlocking: the
    // workers take the engine's lock before this stream's.)
    const bool analysis_held = std::exchange(first_audio_due_, false);
    if (complete) {
        --outstanding_;
        if (sentence) sentences_spoken_.add();
    } else if (!shutdown_) {
        --outstanding_;
        if (sentence) sentences_dropped_.add();
    }
    notify_readers();
    lock.unlock();
    if (analysis_held) engine_->wake(*this);
}

// The unit is due when the listener reaches the end of what is written
// (deadline.h), or for a push's first audio, by the first-audio target.
DeadlineGate::Turn StreamCore::wait_turn(const ItemOrigin& origin) {
    DeadlineGate::Due due;
    bool offline = false;
    {
        std::lock_guard lock(mu_);
        if (shutdown_) return {};
        const bool started = listening_ && !(first_audio_pending_ && origin.first_of_push);
        due = chunk_due(horizon(started, origin.pushed, ring_.write_position()));
        // Offline work (an offline stream's, or a reader's whose producer
        // has stepped down in produce()) takes turns of its own, a turn per
        // CPU, outside the live order; a network stream's at its gate
        // (deadline_gate.h).
        // A stepped stream read with read() has no thread to step down: its
        // work takes the offline turns all the same (read_offline()).
        offline = read_offline();
    }
    DeadlineGate& gate = offline                                           ? engine_->offline_gate()
                         : options_.scheduling == SchedulingClass::Network ? engine_->network_gate()
                                                                           : engine_->gate();
    // A stepped stream's unit asked when the pool made it ready: its wait
    // for a pool thread is part of its wait for the turn.
    return gate.wait(
        due,
        [&] {
            return closing_.load(std::memory_order_relaxed) || ring_.cancelled(origin.generation);
        },
        stepped_ ? step_ready_ns_ : 0, stepped_ ? step_taken_ns_ : 0);
}

bool StreamCore::shutting_down() {
    std::lock_guard lock(mu_);
    return shutdown_;
}

bool StreamCore::wait_for_room(std::size_t block_samples, std::uint64_t gen) {
    for (;;) {
        if (ring_.cancelled(gen)) return false;
        const std::size_t fill = ring_.read_available();
        if (fill < std::max<std::size_t>(ring_.effective_latency_samples(), 1) &&
            ring_.write_available() >= block_samples + 16384 / 4)
            return true;
        std::unique_lock lock(mu_);
        if (shutdown_) return false;
        space_cv_.wait_for(lock, kSpacePoll);
    }
}

bool StreamCore::write(std::span<const float> samples, const ItemOrigin& origin, bool last_chunk) {
    if (origin.volume != 1.0f) {
        // Every executor's audio passes here once, so the gain is applied
        // once whichever processor or tier made it.
        volume_scratch_.resize(samples.size());
        for (std::size_t i = 0; i < samples.size(); ++i)
            volume_scratch_[i] = samples[i] * origin.volume;
        samples = volume_scratch_;
    }
    // A stepped producer never waits here: what the ring has no room for
    // is held and goes in first at its next step (write_held_audio()).
    if (stepped_ && !held_audio_.empty()) {
        held_audio_.insert(held_audio_.end(), samples.begin(), samples.end());
        held_last_ = last_chunk;
        return true;
    }
    for (;;) {
        const std::optional<std::size_t> n = write_what_fits(samples, origin, last_chunk);
        if (!n) return false;
        samples = samples.subspan(*n);
        if (samples.empty()) return true;
        if (stepped_) {
            held_audio_.assign(samples.begin(), samples.end());
            held_origin_ = origin;
            held_last_ = last_chunk;
            return true;
        }
        std::unique_lock lock(mu_);
        if (shutdown_) return false;
        space_cv_.wait_for(lock, kSpacePoll);
    }
}

std::optional<std::size_t> StreamCore::write_what_fits(std::span<const float> samples,
                                                       const ItemOrigin& origin, bool last_chunk) {
    if (ring_.cancelled(origin.generation)) return std::nullopt;
    const std::size_t room = std::min(samples.size(), ring_.write_available());
    if (room < samples.size() && last_chunk) return 0;
    if (last_chunk) mark_end_if_last(samples.size());
    mark_words_before(ring_.write_position() + room);
    // Noted before the samples go in: a reader may take them and ask for
    // the stats at once, and must find first audio set by then.
    if (room > 0) note_first_audio(origin);
    const std::size_t n = ring_.write(samples.first(room));
    if (n > 0) {
        // Through the mutex: a reader between its check of the ring and its
        // wait would otherwise miss this and sleep out its wait (read_some()
        // hands blocks on as they come).
        { std::lock_guard lock(mu_); }
        notify_readers();
    }
    return n;
}

// Before the final chunk of the final queued item goes in, publish where
// speech will end, so that pull() can tell "finished" from "late".
void StreamCore::mark_end_if_last(std::size_t final_chunk) {
    std::lock_guard lock(mu_);
    if (outstanding_ == 1 && text_queue_.empty() && queue_.empty() && !analysing_)
        ring_.mark_end(ring_.write_position() + final_chunk);
}

void StreamCore::note_first_audio(const ItemOrigin& origin) {
    if (first_audio_pending_ && origin.first_of_push) {
        first_audio_pending_ = false;
        bool analysis_held = false;
        {
            std::lock_guard lock(mu_);
            first_audio_ms_ = seconds_since(origin.pushed) * 1000.0;
            analysis_held = std::exchange(first_audio_due_, false);
            listening_ = true;  // the listener's clock starts (sentence_deadline())
            listener_start_ = Clock::now();
            listener_start_pos_ = ring_.write_position();
        }
        if (analysis_held) engine_->wake(*this);  // the next sentence's analysis may start
    }
}

void StreamCore::notify_readers() {
    data_cv_.notify_all();
    // A listener that is set runs to its end before it can be changed:
    // once set_audio_listener() returns, the old one is never called again.
    std::lock_guard lock(listener_mu_);
    if (audio_listener_) audio_listener_();
}

void StreamCore::set_audio_listener(std::function<void()> listener) {
    std::lock_guard lock(listener_mu_);
    audio_listener_ = std::move(listener);
}

}  // namespace etude::engine
