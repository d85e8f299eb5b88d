// StreamCore's producer as steps on the engine's pools: a network or
// offline stream whose voice needs no thread to wait on
// (StreamVoice::steps_on_a_pool(): a Piper voice on the CPU) has none.
// Each step does what a turn of produce()'s loop does between items (a
// cancel acknowledged, the next item taken) and then one unit of the item:
// a chunk, or a marker's mark or as much of its silence as the ring takes.
// Its place between steps is data here (step_item_, the held audio), so a
// pool's few threads, a turn each, step every such stream of its class
// (EngineWorkers::network_steps(), offline_steps()): a server with a
// thousand streams has the pool's threads, not a thousand producers.
//
// A step waits only for its turn at its class's gate (as the producer
// did; a network stream read with read() takes the offline turns, as a
// producer that steps down does): its audio never waits for room in the
// ring. What the ring cannot take is held (write()) and goes in first at
// the next step. Until it is in, read() and read_some() wake the stream as
// they make room; a real-time reader (pull()) never signals, so for its
// stream the pool looks again every millisecond, as a producer polled.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/scheduling/engine_workers.h"
#include "engine/streams/stream_core.h"
#include "engine/streams/stream_core_detail.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {
namespace {

// How soon a stream whose audio waits for room looks again: a real-time
// reader (pull()) never signals, so for one the pool polls as the threaded
// producer does (stream_core_producer.cpp); read() and read_some() wake
// the stream when they make room, and the longer look is a safety net.
constexpr std::int64_t kRoomPollNs = 1'000'000, kRoomLookNs = 50'000'000;
// A marker's silence goes in pieces of at most this many samples, so a
// long break holds no more than one piece when the ring is full.
constexpr std::size_t kSilencePiece = 4096;

const ItemOrigin& origin_of(const WorkItem& item) {
    return std::visit([](const auto& i) -> const ItemOrigin& { return i->origin; }, item);
}

}  // namespace

bool stream_core_detail::producers_stepped() {
    static const bool stepped = [] {
        const char* v = std::getenv("ETUDE_PRODUCERS");
        return !(v && std::string_view(v) == "threads");
    }();
    return stepped;
}

WorkDue StreamCore::producer_due() const {
    const WorkItem* item = step_item_ ? &*step_item_ : queue_.empty() ? nullptr : &queue_.front();
    if (!item) return {};
    const ItemOrigin& origin = origin_of(*item);
    const bool started = listening_ && !(first_audio_pending_ && origin.first_of_push);
    return chunk_due(horizon(started, origin.pushed, ring_.write_position()));
}

void StreamCore::wake_producer() {
    work_cv_.notify_all();
    if (!stepped_) return;
    // step_item_ and first_audio_pending_ are the pool thread's: a wake
    // reads the queue's head instead, and with none it knows no due.
    std::optional<WorkDue> due;
    {
        std::lock_guard lock(mu_);
        if (!queue_.empty())
            due = chunk_due(
                horizon(listening_, origin_of(queue_.front()).pushed, ring_.write_position()));
    }
    if (due)
        step_member_.wake(*due);
    else
        step_member_.wake();  // it keeps the due it had
}

bool StreamCore::held_audio_stays() {
    if (write_held_audio()) return false;
    // The flag first, then one more try: a reader that made room after the
    // try above and before the flag went up is seen by this try, and one
    // after sees the flag (read_audio(), read_some(): a fence each side).
    waiting_for_room_.store(true);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!write_held_audio()) return true;
    waiting_for_room_.store(false, std::memory_order_relaxed);
    return false;
}

StepNext StreamCore::look_for_room() const {
    return StepNext::look_again(rt::now_ns() + (ring_.live_consumer() ? kRoomPollNs : kRoomLookNs));
}

bool StreamCore::write_held_audio() {
    if (!held_audio_.empty()) {
        const std::optional<std::size_t> n = write_what_fits(held_audio_, held_origin_, held_last_);
        if (!n) {
            held_audio_.clear();  // cancelled: the item finishes as dropped below
            held_dropped_ = true;
        } else
            held_audio_.erase(held_audio_.begin(), held_audio_.begin() + std::ptrdiff_t(*n));
        if (!held_audio_.empty()) return false;
        held_audio_.shrink_to_fit();  // a chunk's worth, seldom needed
    }
    if (held_finish_) {
        const HeldFinish f = *std::exchange(held_finish_, std::nullopt);
        finish_item(f.complete && !std::exchange(held_dropped_, false), f.seconds, f.sentence);
    }
    return true;
}

bool StreamCore::speak_marker_step(const SpeechMarker& m, bool& ok) {
    ok = false;
    if (ring_.cancelled(m.origin.generation)) return true;
    if (!m.mark.empty() || m.silence_samples == 0) {
        ok = speak_marker(m);  // a mark, or nothing: never waits
        return true;
    }
    if (!marker_started_) {
        marker_started_ = true;
        marker_left_ = m.silence_samples;
    }
    static const std::vector<float> zeros(kSilencePiece, 0.0f);
    while (marker_left_ > 0) {
        const std::size_t n = std::min(marker_left_, kSilencePiece);
        marker_left_ -= n;
        if (!write(std::span<const float>(zeros.data(), n), m.origin, marker_left_ == 0))
            return true;  // cancelled
        // The ring is full: the rest at the next steps (this piece, held,
        // goes in first).
        if (!held_audio_.empty() && marker_left_ > 0) return false;
    }
    ok = true;
    return true;
}

StepNext StreamCore::produce_step(std::int64_t ready_ns, std::int64_t taken_ns) {
    step_ready_ns_ = ready_ns;
    step_taken_ns_ = taken_ns;
    if (held_audio_stays()) return look_for_room();
    waiting_for_room_.store(false, std::memory_order_relaxed);
    if (!step_item_) {
        // Between items: what produce() does at the top of its loop.
        std::unique_lock lock(mu_);
        producer_busy_ = false;
        if (shutdown_) return StepNext::idle();
        acknowledge_cancel();
        if (queue_.empty()) return StepNext::idle();
        step_item_ = take_next_item();
        step_compute_seconds_ = 0.0;
        marker_started_ = false;
        const bool marker = std::holds_alternative<std::shared_ptr<SpeechMarker>>(*step_item_);
        if (!marker)
            first_audio_due_ =
                voice_->holds_analysis_until_first_audio() && origin_of(*step_item_).first_of_push;
        lock.unlock();
        engine_->wake(*this);  // room in the look-ahead for the next analysis
        if (!marker) {
            first_audio_pending_ = true;
            voice_->begin(*step_item_);
        }
    }
    HeldFinish finish;
    bool done = false;
    if (auto* marker = std::get_if<std::shared_ptr<SpeechMarker>>(&*step_item_)) {
        bool ok = false;
        done = speak_marker_step(**marker, ok);
        finish = {ok, 0.0, false};
    } else {
        const Spoken spoken = voice_->step();
        step_compute_seconds_ += spoken.compute_seconds;
        done = !spoken.more;
        finish = {spoken.complete, step_compute_seconds_, true};
    }
    if (done) {
        held_origin_ = origin_of(*step_item_);
        step_item_.reset();
        // Its end is counted once its audio is all in the ring: a reader
        // that found the stream idle before would stop short.
        held_finish_ = finish;
        if (held_audio_stays()) return look_for_room();
    } else if (!held_audio_.empty() && held_audio_stays()) {
        return look_for_room();
    }
    std::lock_guard lock(mu_);
    if (shutdown_) return StepNext::idle();
    // The next unit: this item's, or the next item's (a cancel to
    // acknowledge counts as one).
    if (!step_item_ && queue_.empty() && ring_.generation() == seen_generation_) {
        producer_busy_ = false;
        return StepNext::idle();
    }
    return StepNext::ready(producer_due());
}

}  // namespace etude::engine
