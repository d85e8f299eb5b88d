// The playback ring: everything the real-time consumer touches. The
// stream's producer writes audio into a lock-free ring; pull() (the audio
// callback) reads it at a fixed latency, fades around underruns and
// cancels, counts underruns, and keeps the timeline fixed (audio that
// arrives after its time was played as silence is skipped).
//
// Cancel hand-off: cancel() bumps the generation; the consumer fades what it
// is playing over one short ramp and drops audio until the producer has
// acknowledged the cancel (acknowledge() publishes the write position at
// that moment: everything before it is old, after it new).
//
// Threads:
//  * pull(), pull_cancelled(), read_audio(), cancel_pending(): the consumer,
//    one thread; wait-free, no allocation, no locks (pull() is the real-time
//    entry point, proven by tests/engine/realtime_pull_test.cpp).
//  * write(), write_available(), write_position(), mark_end(), acknowledge():
//    the producer, one thread.
//  * cancel(), cancelled(), generation(), the counters and the planning hints
//    (playing(), fill, pull size): any thread, relaxed atomics.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/scheduling/deadline.h"
#include "rt/counters.h"
#include "rt/spsc_ring.h"

namespace etude::engine {

class PlaybackRing {
  public:
    PlaybackRing(double rate, std::size_t latency_samples, double cancel_fade_ms);

    // ---- consumer thread ----------------------------------------------------
    // Real-time: fills `out`, padding with silence where nothing is ready.
    std::size_t pull(std::span<float> out) noexcept;
    // A cancel is waiting for the consumer to fade and drop old audio.
    bool cancel_pending() const noexcept {
        return generation_.load(std::memory_order_acquire) != consumer_generation_;
    }
    // Fades out the cancelled speech (once) and drops old audio.
    std::size_t pull_cancelled(std::span<float> out) noexcept;
    // Offline consumer: reads what is there, no prebuffer, no padding.
    std::size_t read_audio(std::span<float> out) noexcept;

    // ---- producer thread ----------------------------------------------------
    std::size_t write(std::span<const float> samples) { return ring_.write(samples); }
    std::size_t write_available() const { return ring_.write_available(); }
    std::uint64_t write_position() const { return ring_.write_position(); }
    // Where queued speech will end, so pull() tells "finished" from "late".
    void mark_end(std::uint64_t position) {
        end_of_speech_.store(position, std::memory_order_release);
    }
    // The producer has seen cancel number `generation`.
    void acknowledge(std::uint64_t generation) {
        ack_position_.store(ring_.write_position(), std::memory_order_relaxed);
        producer_generation_.store(generation, std::memory_order_release);
    }

    // ---- any thread ---------------------------------------------------------
    void cancel() { generation_.fetch_add(1, std::memory_order_release); }
    std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
    bool cancelled(std::uint64_t generation) const { return this->generation() != generation; }
    // The last cancel the producer has acknowledged (0: none yet).
    std::uint64_t acknowledged_generation() const {
        return producer_generation_.load(std::memory_order_acquire);
    }
    // The producer has acknowledged the latest cancel.
    bool cancel_acknowledged() const {
        return producer_generation_.load(std::memory_order_acquire) == generation();
    }
    std::size_t read_available() const { return ring_.read_available(); }
    // Samples consumed (read, pulled or dropped): consumer thread.
    std::uint64_t read_position() const { return ring_.read_position(); }
    // Speech is playing (the consumer is past its prebuffer): a hint for planning.
    bool playing() const { return in_speech_.load(std::memory_order_relaxed); }
    // The largest pull() so far: the consumer's period.
    std::size_t max_pull() const {
        return static_cast<std::size_t>(std::max<std::int64_t>(max_pull_.get(), 0));
    }
    // pull() has been called: a live consumer, who hears late audio.
    bool live_consumer() const { return live_consumer_.load(std::memory_order_relaxed); }
    double rate() const { return rate_; }
    std::size_t latency_samples() const { return latency_samples_; }
    // The latency in force: the budget, or twice the consumer's period if
    // that is larger (a consumer cannot be served with less than it takes).
    std::size_t effective_latency_samples() const {
        return std::max(latency_samples_, 2 * max_pull());
    }
    // What the deadline (deadline.h) depends on, now.
    PlaybackState playback_state() const {
        return {rate_,     ring_.read_available(), effective_latency_samples(), max_pull(),
                playing(), live_consumer()};
    }
    std::uint64_t delivered() const { return delivered_.get(); }
    std::uint64_t underruns() const { return underruns_.get(); }
    std::uint64_t underrun_samples() const { return underrun_samples_.get(); }

  private:
    const double rate_;
    const std::size_t latency_samples_;
    rt::SpscRing<float> ring_;
    std::atomic<std::uint64_t> generation_{0};           // bumped by cancel()
    std::atomic<std::uint64_t> producer_generation_{0};  // last cancel the producer saw
    std::atomic<std::uint64_t> ack_position_{0};         // ring write position at that moment
    std::atomic<std::uint64_t> end_of_speech_{0};        // ring position where queued speech ends
    rt::Counter delivered_, underruns_, underrun_samples_;
    rt::MaxGauge max_pull_;
    std::atomic<bool> live_consumer_{false};

    // Consumer-thread state.
    std::uint64_t consumer_generation_ = 0;
    bool cancel_faded_ = false;
    // Written by the consumer only; also read by the block scheduler's
    // deadline, hence atomic (relaxed: a hint for planning).
    std::atomic<bool> in_speech_{false};
    std::size_t owed_ = 0;     // samples played as silence during an underrun, to skip
    std::size_t fade_in_ = 0;  // position in the fade-in after an underrun
    const std::size_t fade_len_, underrun_fade_len_;
};

}  // namespace etude::engine
