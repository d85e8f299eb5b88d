// StreamCore's construction, intake (push_text, push_ssml, push_mel,
// push_phoneme_ids, set_voice, cancel), statistics, the offline reader and
// the engine workers' side (taking sentences, analysing them, rendering
// ahead). The producer loop and the VoiceSink writes are in
// stream_core_producer.cpp; what differs by voice, in its StreamVoice.
#include "engine/streams/stream_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "engine/scheduling/deadline.h"
#include "engine/scheduling/engine_workers.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/ssml_document.h"
#include "engine/streams/stream_core_detail.h"
#include "engine/streams/text_input.h"
#include "engine/utf8.h"
#include "engine/voices/utterance_renderer.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {
namespace {

using stream_core_detail::seconds_since;

// Sentences analysed ahead of the one being spoken: enough to keep the
// vocoder and the render workers fed, few enough that a long text costs
// memory for only a few.
constexpr std::size_t kLookaheadSentences = 3;

// "20", "0.05": a number as a person wrote it, for messages.
std::string format_number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

}  // namespace

StreamCore::StreamCore(std::shared_ptr<EngineWorkers> engine, const FliteVoice& voice,
                       std::shared_ptr<const PiperVoice> piper, StreamOptions options)
    : engine_(std::move(engine)),
      options_(std::move(options)),
      rate_(options_.sample_rate),
      ring_(rate_, static_cast<std::size_t>(rate_ * options_.latency_ms / 1000.0),
            options_.cancel_fade_ms) {
    const FaultSpec faults = faults_for_stream(options_.faults);
    slow_analysis_ms_ = faults.slow_analysis_ms;
    slow_split_ms_ = faults.slow_split_ms;
    voice_ = make_stream_voice(*engine_, options_, faults, voice, std::move(piper), ring_, *this,
                               records_);
    if (const auto* p = std::get_if<PiperVoiceOptions>(&options_.voice))
        // Seconds first, as Piper counts int(rate * seconds): 700 ms at 22050 Hz
        // is 15434 samples, where rate * 700 / 1000 rounds to 15435.
        sentence_silence_samples_ =
            static_cast<std::size_t>(rate_ * (p->sentence_silence_ms / 1000.0));
    input_ = voice_->make_input();
    // A server's and an offline stream's producer is a member of the
    // engine's step pool of its class when its voice's steps wait for
    // nothing but a turn (stream_core_steps.cpp); a live stream keeps its
    // SCHED_FIFO producer.
    stepped_ = options_.scheduling != SchedulingClass::Live && voice_->steps_on_a_pool() &&
               stream_core_detail::producers_stepped();
}

void StreamCore::start() {
    if (stepped_) {
        // No thread: the engine's pool steps it (stream_core_steps.cpp).
        seen_generation_ = ring_.acknowledged_generation();
        StepPool& pool = options_.scheduling == SchedulingClass::Offline ? engine_->offline_steps()
                                                                         : engine_->network_steps();
        step_member_ = pool.join([this](std::int64_t ready_ns, std::int64_t taken_ns) {
            return produce_step(ready_ns, taken_ns);
        });
        if (options_.wait_for_device) voice_->wait_for_device();
        return;
    }
    producer_ = std::thread([this] {
        // The producer is on every block's critical path (it waits for the
        // result, commits it, resamples it and writes the ring), so it runs
        // at the block processors' priority: left at normal priority behind a
        // CPU-bound load it is held back long enough for the ring to run dry
        // with every block computed in time. Mel streams run their networks
        // on this thread and stay normal. Piper streams run their decoder
        // here too, but a live Piper stream has nothing else to cover a late
        // chunk, so it is raised as well (the CPU backend's helpers take on
        // its scheduling class while they run its ops). docs/benchmarks.md
        // ("The producer's priority") has the runs behind this. The ring
        // bounds how far ahead it works, so it sleeps once it is ahead.
        // (StreamVoice::producer_realtime().)
        if (options_.realtime_workers && voice_->producer_realtime())
            producer_realtime_ = rt::make_current_thread_realtime(kProcessorPriority);
        produce();
    });
    if (options_.wait_for_device) voice_->wait_for_device();
}

StreamCore::~StreamCore() {
    {
        std::lock_guard lock(mu_);
        shutdown_ = true;
        closing_ = true;
    }
    engine_->wake_gates();
    work_cv_.notify_all();
    space_cv_.notify_all();
    notify_readers();
    voice_->stop();
    step_member_.leave();  // waits for a step in progress; none comes after
    if (producer_.joinable()) producer_.join();
}

std::size_t StreamCore::mel_bands() const {
    return voice_->mel_bands();
}

void StreamCore::require_text(const char* what) const {
    if (!voice_->speaks_text())
        throw Error(std::string("this stream vocodes mel frames (MelVoiceOptions::model); ") +
                    what);
}

void StreamCore::push_mel(std::span<const float> mel, std::size_t frames, bool last) {
    const std::size_t n_mels = voice_->mel_bands();
    if (n_mels == 0)
        throw Error("push_mel needs a mel stream: create it with MelVoiceOptions::model set");
    if (mel.size() != frames * n_mels)
        throw Error("push_mel: " + std::to_string(mel.size()) + " values is not " +
                    std::to_string(n_mels) + " mels x " + std::to_string(frames) + " frames");
    for (float v : mel)
        if (!std::isfinite(v)) throw Error("push_mel: the chunk holds a value that is not finite");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    if (frames == 0 && !last) return;
    auto c = std::make_shared<MelChunk>();
    c->mel.assign(mel.begin(), mel.end());
    c->frames = frames;
    c->last = last;
    c->origin.pushed = Clock::now();
    {
        std::lock_guard lock(mu_);
        c->origin.generation = ring_.generation();
        c->origin.first_of_push = outstanding_ == 0;
        queued_samples_ += estimated_samples(WorkItem(c));
        mel_open_ = !last;
        queue_.push_back(std::move(c));
        ++outstanding_;
        ++sentences_queued_;
    }
    wake_producer();
}

std::size_t StreamCore::push_text(std::string_view text) {
    require_text("use push_mel");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    std::lock_guard input(input_mu_);
    return add_text(text);
}

std::size_t StreamCore::push_ssml(std::string_view document) {
    require_text("use push_mel");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    // Refused whole, before anything is queued.
    if (auto bad = utf8::find_bad_sequence(document))
        throw Error("SSML is not valid UTF-8 (" + utf8::describe(*bad) + ")");
    const std::vector<Piece> pieces = parse_message(document);
    for (const Piece& p : pieces)
        if (p.kind == Piece::Kind::Mark && p.text.size() > SpeechMark::kMaxName)
            throw Error("SSML mark name longer than " + std::to_string(SpeechMark::kMaxName) +
                        " bytes: \"" + p.text.substr(0, 20) + "...\"");
    std::lock_guard input(input_mu_);
    if (!utf8_tail_.empty())
        throw Error(
            "SSML after text that ends inside a UTF-8 character: push the rest of it first");
    std::size_t queued = 0;
    for (const Piece& p : pieces) {
        switch (p.kind) {
            case Piece::Kind::Text:
                queued += set_prosody(p.prosody.within(base_prosody_));
                queued += add_text(p.text);
                break;
            case Piece::Kind::Mark:
                queued += queue_marker(p.text, 0);
                break;
            case Piece::Kind::Silence:
                queued += queue_marker(
                    {}, static_cast<std::size_t>(rate_ * std::max(p.silence_ms, 0) / 1000.0));
                break;
        }
    }
    // What follows the document (push_text) is spoken as before it.
    queued += set_prosody(base_prosody_);
    return queued;
}

std::size_t StreamCore::queue_held_text() {
    try {
        const std::size_t queued = queue_text({input_.finish()});
        // What a mark or a prosody change cut off is a sentence's front: the
        // rest that follows continues it, with no sentence silence between.
        if (queued > 0) sentence_before_ = false;
        return queued;
    } catch (...) {
        holding_ = false;  // what was held is gone either way (the caller hears why)
        throw;
    }
}

// A sentence has one prosody: text held under another is ended first, as a
// mark ends it.
std::size_t StreamCore::set_prosody(const Prosody& prosody) {
    if (prosody == input_prosody_) return 0;
    const std::size_t queued = queue_held_text();
    input_prosody_ = prosody;
    holding_ = false;  // nothing is held now: see end_input()
    return queued;
}

void StreamCore::set_stream_prosody(const Prosody& p) {
    require_text("it has no prosody");
    const auto in = [](float v, float lo, float hi) {
        return std::isfinite(v) && v >= lo && v <= hi;
    };
    if (!in(p.rate, 0.1f, 10.0f))
        throw Error("prosody rate must be 0.1..10, not " + format_number(p.rate));
    if (!in(p.pitch, 0.5f, 2.0f))
        throw Error("prosody pitch must be 0.5..2, not " + format_number(p.pitch));
    if (!in(p.range, 0.0f, 4.0f))
        throw Error("prosody range must be 0..4, not " + format_number(p.range));
    if (!in(p.volume, 0.0f, 4.0f))
        throw Error("prosody volume must be 0..4, not " + format_number(p.volume));
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    std::lock_guard input(input_mu_);
    refuse_split_character("prosody");
    set_prosody(p);  // first: it may throw, and then nothing has changed
    base_prosody_ = p;
}

void StreamCore::refuse_split_character(const char* what) const {
    if (!utf8_tail_.empty())
        throw Error(std::string(what) +
                    " after text that ends inside a UTF-8 character: push the rest of it first");
}

void StreamCore::push_mark(std::string_view name) {
    require_text("use push_mel");
    if (name.size() > SpeechMark::kMaxName)
        throw Error("mark name longer than " + std::to_string(SpeechMark::kMaxName) + " bytes");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    std::lock_guard input(input_mu_);
    refuse_split_character("a mark");
    queue_marker(std::string(name), 0);
}

void StreamCore::push_break(double ms) {
    require_text("use push_mel");
    if (!(ms >= 0.0 && ms <= 60000.0)) throw Error("a break must be 0..60000 ms");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    std::lock_guard input(input_mu_);
    refuse_split_character("a break");
    queue_marker({}, static_cast<std::size_t>(rate_ * ms / 1000.0));
}

std::size_t StreamCore::queue_marker(std::string mark, std::size_t silence_samples) {
    // What is held before it is complete now: a mark's place is after it.
    const std::size_t queued = queue_held_text();
    auto m = std::make_shared<SpeechMarker>();
    m->mark = std::move(mark);
    m->silence_samples = silence_samples;
    {
        std::lock_guard lock(mu_);
        m->origin = {ring_.generation(), Clock::now(), false};
        push_marker(std::move(m));
    }
    holding_ = false;  // only now: see end_input()
    engine_->wake(*this);
    return queued;
}

void StreamCore::push_marker(std::shared_ptr<SpeechMarker> marker) {
    Sentence carrier;
    carrier.origin = marker->origin;
    carrier.marker = std::move(marker);
    text_queue_.push_back(std::move(carrier));
    ++outstanding_;
    ++markers_waiting_;
}

bool StreamCore::next_mark(SpeechMark& mark) noexcept {
    MarkRecord r;
    while (marks_.read(std::span<MarkRecord>(&r, 1)) == 1) {
        if (ring_.cancelled(r.generation)) continue;  // its speech was dropped
        mark = r.mark;
        return true;
    }
    return false;
}

std::size_t StreamCore::add_text(std::string_view text) {
    // The piece continues the character the last one began, if it did.
    const std::string joined = utf8_tail_ + std::string(text);
    const std::size_t tail = utf8::unfinished_tail(joined);
    if (auto bad =
            utf8::find_bad_sequence(std::string_view(joined).substr(0, joined.size() - tail))) {
        const bool continuing = bad->offset < utf8_tail_.size();
        bad->offset = continuing ? 0 : bad->offset - utf8_tail_.size();
        throw Error("text is not valid UTF-8 (" + utf8::describe(*bad) +
                    (continuing ? ", continuing the character the last piece began)" : ")"));
    }
    utf8_tail_ = joined.substr(joined.size() - tail);
    const auto released = input_.add(text);
    // The held flag drops only once what it held is queued (see end_input()).
    const bool holds = input_.holds_speech();
    if (holds) holding_ = true;
    const std::size_t queued = queue_text(released);
    holding_ = holds;
    return queued;
}

std::size_t StreamCore::end_input() {
    std::lock_guard input(input_mu_);
    if (!utf8_tail_.empty())
        throw Error("the text ends inside a UTF-8 character (" + std::to_string(utf8_tail_.size()) +
                    " of its bytes came): push the rest of it, or cancel()");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    const std::string rest = input_.finish();
    // The next input's first sentence starts without a gap, even if this
    // one's last could not be queued.
    struct NextInputStarts {
        bool& sentence_before;
        ~NextInputStarts() { sentence_before = false; }
    } next_input{sentence_before_};
    const std::size_t n = queue_text({rest});
    // Only now: a reader that saw the held flag down before the rest was
    // queued (nothing outstanding, nothing held) ended its read() early, with
    // the last sentence still to come (TextPieces caught it, 1 run in CI).
    holding_ = false;
    { std::lock_guard lock(mu_); }  // a reader between its check and its wait
    notify_readers();               // a reader waiting for the held text to end
    return n;
}

std::size_t StreamCore::queue_text(const std::vector<std::string>& stretches) {
    std::size_t queued = 0;
    const bool words = report_words_.load(std::memory_order_relaxed);
    if (slow_split_ms_ > 0 && !stretches.empty())  // a fault drill: a slow split (fault_plan.h)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(slow_split_ms_));
    for (const auto& stretch : stretches) {
        // First audio counts from here, the voice's splitting included.
        const auto pushed = Clock::now();
        voice_->split(stretch, words, [&](std::vector<Sentence> sentences, bool continuing) {
            queued += sentences.size();
            queue_sentences(std::move(sentences), pushed, continuing, input_prosody_, true);
        });
    }
    return queued;
}

void StreamCore::queue_sentences(std::vector<Sentence> sentences, Clock::time_point pushed,
                                 bool continuing, const Prosody& prosody, bool spaced) {
    if (sentences.empty()) return;
    {
        std::lock_guard lock(mu_);
        const auto gen = ring_.generation();
        // First-audio latency is measured from a push into an idle stream,
        // whose listener starts again with that audio.
        bool first = !continuing && outstanding_ == markers_waiting_;
        if (first) listening_ = false;
        for (auto& s : sentences) {
            // The silence between sentences goes before the second and later
            // ones (as Piper writes it), so the input's last sentence, which
            // only end_input() may reveal as last, needs none after it.
            if (spaced && sentence_before_ && sentence_silence_samples_ > 0) {
                auto gap = std::make_shared<SpeechMarker>();
                gap->silence_samples = sentence_silence_samples_;
                gap->origin = {gen, pushed, false, prosody.volume};
                push_marker(std::move(gap));
            }
            // (A long sentence cut in two is one: no silence inside it.)
            if (spaced) sentence_before_ = !s.continued;
            s.prosody = prosody;
            s.origin = {gen, pushed, first, prosody.volume};
            text_queue_.push_back(std::move(s));
            first = false;
        }
        outstanding_ += sentences.size();
        sentences_queued_ += sentences.size();
    }
    engine_->wake(*this);
}

void StreamCore::push_phoneme_ids(std::span<const std::int64_t> ids) {
    const auto pushed = Clock::now();
    std::vector<Sentence> one(1);
    one[0].phoneme_ids = voice_->check_ids(ids);  // no text, so no words
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    queue_sentences(std::move(one), pushed, false, Prosody{}, false);
}

void StreamCore::set_voice(std::string_view name) {
    voice_->set_voice(name);
}

void StreamCore::cancel() {
    std::size_t dropped;
    // Silence first (the ring's fade), then the held text: a push in
    // progress on another thread holds the input for as long as it queues.
    ring_.cancel();
    // A producer waiting for its turn gives up (deadline_gate.h).
    engine_->wake_gates();
    {
        std::lock_guard lock(mu_);
        dropped = text_queue_.size() + queue_.size();
        outstanding_ -= dropped;
        markers_waiting_ = 0;
        text_queue_.clear();
        queue_.clear();
        queued_samples_ = 0;
        current_end_pos_ = 0;  // the item being spoken ends here, not where it would have
        mel_open_ = false;     // the next push_mel starts a new utterance
        ++cancels_;
    }
    {
        std::lock_guard input(input_mu_);
        input_.clear();
        utf8_tail_.clear();
        holding_ = false;
        sentence_before_ = false;
    }
    sentences_dropped_.add(dropped);
    wake_producer();
    space_cv_.notify_all();
    notify_readers();
}

bool StreamCore::busy() const {
    std::lock_guard lock(mu_);
    // An open mel utterance (its `last` chunk not yet pushed) is unfinished work.
    return outstanding_ > 0 || mel_open_ || holding_ || ring_.read_available() > 0;
}

double StreamCore::latency_ms() const {
    return static_cast<double>(ring_.effective_latency_samples()) * 1000.0 / rate_;
}

StreamStats StreamCore::stats() const {
    StreamStats s;
    s.samples_delivered = ring_.delivered();
    s.underruns = ring_.underruns();
    s.underrun_samples = ring_.underrun_samples();
    s.sentences_spoken = sentences_spoken_.get();
    s.sentences_dropped = sentences_dropped_.get();
    s.frames_vocoded = frames_rendered_ahead_.get();
    s.latency_ms = latency_ms();
    s.marks = marks_reached_.get();
    s.marks_dropped = marks_dropped_.get();
    s.words_unpaired = words_unpaired_.get();
    s.vocoder = voice_->vocoder();
    s.realtime_workers = producer_realtime_;  // a voice with processors of its own says
    voice_->fill_stats(s);
    records_.fill_stats(s);
    std::lock_guard lock(mu_);
    s.sentences_queued = sentences_queued_;
    s.cancels = cancels_;
    s.sentences_unspeakable = sentences_unspeakable_;
    s.unspeakable_reason = unspeakable_reason_;
    s.first_audio_ms = first_audio_ms_;
    s.frontend_seconds = frontend_seconds_;
    s.vocoder_seconds = vocoder_seconds_;
    return s;
}

void StreamCore::write_trace(const std::string& path) const {
    write_chrome_trace(path, records_.records(BlockRecorder::kCapacity), voice_->kernel_timings());
}

// ---- offline consumer -------------------------------------------------------

std::size_t StreamCore::read(std::span<float> out) {
    // read() is the offline reader's call (read_some() is a server's, pull()
    // a real-time consumer's): its producer steps down at its next item
    // (produce()). A bound on how far ahead of real time it reads was tried
    // and dropped: readers that each read one reply per stream never got
    // that far ahead beside each other, and kept the cores from a live
    // stream (docs/benchmarks.md).
    offline_reader_.store(true, std::memory_order_relaxed);
    return read_audio(out);
}

std::size_t StreamCore::read_audio(std::span<float> out) {
    std::size_t got = 0;
    while (got < out.size()) {
        if (ring_.cancel_pending()) {
            const std::size_t n = ring_.pull_cancelled(out.subspan(got));
            got += n;
            if (n == 0 && ring_.cancel_pending()) {
                // Wait for the producer to acknowledge the cancel (it does
                // once its current chunk or block is done) instead of
                // spinning: a server's synthesis threads spun here at full
                // CPU while their producers waited for a core.
                std::unique_lock lock(mu_);
                data_cv_.wait_for(lock, std::chrono::milliseconds(50),
                                  [&] { return ring_.cancel_acknowledged() || shutdown_; });
                if (shutdown_) break;
            }
            continue;
        }
        const std::size_t n = ring_.read_audio(out.subspan(got));
        got += n;
        if (n > 0) {
            space_cv_.notify_one();
            if (stepped_ && room_awaited()) wake_producer();
            continue;
        }
        std::unique_lock lock(mu_);
        data_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] {
            return ring_.read_available() > 0 || (outstanding_ == 0 && !mel_open_ && !holding_) ||
                   shutdown_;
        });
        if (ring_.read_available() == 0 &&
            ((outstanding_ == 0 && !mel_open_ && !holding_) || shutdown_))
            break;
    }
    return got;
}

std::size_t StreamCore::read_some(std::span<float> out, int timeout_ms) {
    if (out.empty()) return 0;
    const auto until = Clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
    for (;;) {
        if (ring_.cancel_pending()) {
            const std::size_t n = ring_.pull_cancelled(out);
            if (n > 0) return n;
        } else {
            const std::size_t n = ring_.read_audio(out);
            if (n > 0) {
                space_cv_.notify_one();
                if (stepped_ && room_awaited()) wake_producer();
                return n;
            }
        }
        std::unique_lock lock(mu_);
        // Audio on its way: queued items, or a cancel not yet acknowledged.
        // Held text and an open mel utterance wait for the caller instead.
        const auto coming = [&] {
            return outstanding_ > 0 || (ring_.cancel_pending() && !ring_.cancel_acknowledged());
        };
        if (shutdown_ || !coming()) return 0;
        if (!data_cv_.wait_until(lock, until, [&] {
                return shutdown_ || !coming() || ring_.read_available() > 0 ||
                       (ring_.cancel_pending() && ring_.cancel_acknowledged());
            }))
            return 0;
    }
}

// ---- engine workers ---------------------------------------------------------

bool StreamCore::sentence_ready() const {
    return !shutdown_ && !text_queue_.empty() && !analysing_ && !first_audio_due_ &&
           queue_.size() < kLookaheadSentences;
}

std::optional<DeadlineGate::Due> StreamCore::sentence_deadline() const {
    std::lock_guard lock(mu_);
    if (!sentence_ready()) return std::nullopt;
    const Sentence& next = text_queue_.front();
    const std::uint64_t written = ring_.write_position();
    const std::uint64_t end = std::max(written, current_end_pos_) + queued_samples_;
    WorkDue due =
        sentence_due(horizon(listening_ && !next.origin.first_of_push, next.origin.pushed, end));
    due.outside = offline_reader_.load(std::memory_order_relaxed) || !options_.realtime_workers;
    return due;
}

StreamHorizon StreamCore::horizon(bool started, Clock::time_point pushed, std::uint64_t end) const {
    StreamHorizon h;
    h.started = started;
    if (started) {
        h.listener_start_ns = steady_ns(listener_start_);
        h.audio_s = static_cast<double>(end - std::min(end, listener_start_pos_)) / rate_;
    } else {
        const std::uint64_t written = ring_.write_position();
        h.pushed_ns = steady_ns(pushed);
        h.audio_s = static_cast<double>(end - std::min(end, written)) / rate_;
    }
    return h;
}

// Takes the next sentence to analyse if this stream has room for more
// look-ahead. Called with the engine's lock held, never this stream's.
std::optional<Sentence> StreamCore::take_sentence() {
    std::lock_guard lock(mu_);
    if (!sentence_ready()) return std::nullopt;
    Sentence s = std::move(text_queue_.front());
    text_queue_.pop_front();
    analysing_ = true;
    return s;
}

void StreamCore::analyse(Sentence sentence) {
    if (sentence.marker) {
        // Nothing to analyse: it joins the producer's queue in its place.
        finish_analysis(Clock::now(), sentence.origin, WorkItem(std::move(sentence.marker)));
        return;
    }
    const auto t0 = Clock::now();
    std::string refusal;
    std::optional<WorkItem> item = voice_->analyse(sentence, refusal);
    if (slow_analysis_ms_ > 0)  // a fault drill: a slow front end (fault_plan.h)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(slow_analysis_ms_));
    finish_analysis(t0, sentence.origin, std::move(item), std::move(refusal));
}

// The front end is done with a sentence: its work item is queued, or, with
// nothing to say or cancelled while being analysed, it is settled here as
// dropped (cancel() counts only the queued sentences).
void StreamCore::finish_analysis(Clock::time_point started, const ItemOrigin& origin,
                                 std::optional<WorkItem> item, std::string refusal) {
    {
        std::lock_guard lock(mu_);
        analysing_ = false;
        frontend_seconds_ += seconds_since(started);
        const bool current = !ring_.cancelled(origin.generation);
        if (current && item) {
            queued_samples_ += estimated_samples(*item);
            queue_.push_back(std::move(*item));
        } else {
            --outstanding_;
            sentences_dropped_.add();
            if (current) {
                ++sentences_unspeakable_;
                if (!refusal.empty()) unspeakable_reason_ = std::move(refusal);
            }
        }
    }
    wake_producer();
    notify_readers();
    engine_->wake(*this);  // a render worker or the next analysis may start
}

// Claims an analysed sentence that is not about to be scheduled by this
// stream's own producer (that one goes block by block, for the lowest
// latency). Called with the engine's lock held.
std::shared_ptr<AnalysedSentence> StreamCore::take_render_job() {
    std::lock_guard lock(mu_);
    // (Spectral streams give every block to the scheduler and the GPU.)
    if (shutdown_ || !voice_->renders_ahead()) return nullptr;
    // While the producer is idle it will take the head itself.
    for (std::size_t i = producer_busy_ ? 0 : 1; i < queue_.size(); ++i) {
        auto* s = std::get_if<std::shared_ptr<AnalysedSentence>>(&queue_[i]);
        if (s && (*s)->state == AnalysedSentence::Pending) {
            (*s)->state = AnalysedSentence::WorkerRendering;
            return *s;
        }
    }
    return nullptr;
}

void StreamCore::render_ahead(const std::shared_ptr<AnalysedSentence>& u) {
    const auto t0 = Clock::now();
    const auto start_ns = rt::now_ns();
    UtteranceRenderer renderer(*u->voice, rate_);
    std::vector<float> audio;
    audio.reserve(static_cast<std::size_t>(static_cast<double>(u->frames.frames) *
                                           u->voice->vocoder_config().frame_period * rate_ /
                                           u->voice->sample_rate()) +
                  1024);
    const bool done = renderer.render(u->frames, [&](std::span<const float> chunk, bool) {
        audio.insert(audio.end(), chunk.begin(), chunk.end());
        return !ring_.cancelled(u->origin.generation) &&
               !u->taken_over.load(std::memory_order_relaxed);
    });
    bool kept = false;
    {
        std::lock_guard lock(mu_);
        kept = u->state == AnalysedSentence::WorkerRendering;  // not taken over
        if (kept) {
            u->audio = std::move(audio);
            u->render_started_ns = start_ns;
            u->render_finished_ns = rt::now_ns();
            u->state = done ? AnalysedSentence::Rendered : AnalysedSentence::Abandoned;
        }
        vocoder_seconds_ += seconds_since(t0);
    }
    if (done && kept) frames_rendered_ahead_.add(u->frames.frames);
    work_cv_.notify_all();
}

}  // namespace etude::engine
