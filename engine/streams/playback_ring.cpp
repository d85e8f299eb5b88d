#include "engine/streams/playback_ring.h"

#include <algorithm>

namespace etude::engine {
namespace {

// Fade applied around an underrun's gap, in ms.
constexpr double kUnderrunFadeMs = 2.0;

std::size_t samples_of(double rate, double ms) {
    return std::max<std::size_t>(1, static_cast<std::size_t>(rate * ms / 1000.0));
}

}  // namespace

PlaybackRing::PlaybackRing(double rate, std::size_t latency_samples, double cancel_fade_ms)
    : rate_(rate),
      latency_samples_(latency_samples),
      // Room for the latency target, a quarter second of slack and a block.
      ring_(latency_samples + static_cast<std::size_t>(rate * 0.25) + 16384),
      fade_len_(samples_of(rate, cancel_fade_ms)),
      underrun_fade_len_(samples_of(rate, kUnderrunFadeMs)) {
    fade_in_ = underrun_fade_len_;  // no fade-in until an underrun has happened
}

std::size_t PlaybackRing::pull(std::span<float> out) noexcept {
    max_pull_.store_max(static_cast<std::int64_t>(out.size()));
    if (!live_consumer_.load(std::memory_order_relaxed))
        live_consumer_.store(true, std::memory_order_relaxed);
    if (cancel_pending()) return pull_cancelled(out);

    // Keep the timeline fixed: samples the consumer already played as
    // silence during an underrun are skipped when they arrive late.
    if (owed_ > 0) {
        const std::size_t skipped = ring_.discard(owed_);
        owed_ -= skipped;
        if (skipped > 0) fade_in_ = 0;
    }

    const std::size_t available = ring_.read_available();
    const auto end = end_of_speech_.load(std::memory_order_acquire);
    if (!in_speech_.load(std::memory_order_relaxed)) {
        // Start only once the fixed latency's worth of audio is ready
        // (or all of a short utterance is), so the latency never drifts.
        const std::size_t prebuffer = effective_latency_samples();
        const bool whole = end > ring_.read_position() && end <= ring_.read_position() + available;
        if (available == 0 || (available < prebuffer && !whole)) {
            std::fill(out.begin(), out.end(), 0.0f);
            return 0;
        }
    }

    const std::size_t n = ring_.read(out);
    std::fill(out.begin() + static_cast<long>(n), out.end(), 0.0f);
    if (n > 0) {
        in_speech_.store(true, std::memory_order_relaxed);
        if (fade_in_ < underrun_fade_len_) {
            for (std::size_t i = 0; i < n && fade_in_ < underrun_fade_len_; ++i, ++fade_in_)
                out[i] *= static_cast<float>(fade_in_) / static_cast<float>(underrun_fade_len_);
        }
    }
    if (n < out.size() && in_speech_.load(std::memory_order_relaxed)) {
        if (ring_.read_position() == end_of_speech_.load(std::memory_order_acquire)) {
            in_speech_.store(false, std::memory_order_relaxed);  // everything queued was played
            owed_ = 0;
        } else {
            // Nothing ready in time: fade out what there is, count it,
            // and remember how much of the timeline was played as silence.
            const std::size_t f = std::min(n, underrun_fade_len_);
            for (std::size_t i = 0; i < f; ++i)
                out[n - f + i] *= 1.0f - static_cast<float>(i + 1) / static_cast<float>(f);
            underruns_.add();
            underrun_samples_.add(out.size() - n);
            owed_ += out.size() - n;
            fade_in_ = 0;
        }
    }
    delivered_.add(n);
    return n;
}

std::size_t PlaybackRing::pull_cancelled(std::span<float> out) noexcept {
    const auto target = generation_.load(std::memory_order_acquire);
    std::size_t n = 0;
    if (!cancel_faded_) {
        // Fade what is left of the current speech over one short ramp.
        n = ring_.read(out.first(std::min(out.size(), fade_len_)));
        for (std::size_t i = 0; i < n; ++i)
            out[i] *= 1.0f - static_cast<float>(i + 1) / static_cast<float>(fade_len_);
        cancel_faded_ = true;
    }
    std::fill(out.begin() + static_cast<long>(n), out.end(), 0.0f);
    delivered_.add(n);
    in_speech_.store(false, std::memory_order_relaxed);
    owed_ = 0;
    // Drop cancelled audio. Once the producer has acknowledged the cancel,
    // everything it wrote before its acknowledgement is old; after, new.
    if (producer_generation_.load(std::memory_order_acquire) == target) {
        const auto ack = ack_position_.load(std::memory_order_relaxed);
        const auto pos = ring_.read_position();
        if (ack > pos) ring_.discard(static_cast<std::size_t>(ack - pos));
        consumer_generation_ = target;
        cancel_faded_ = false;
    } else {
        ring_.discard(ring_.read_available());
    }
    return n;
}

std::size_t PlaybackRing::read_audio(std::span<float> out) noexcept {
    const std::size_t n = ring_.read(out);
    delivered_.add(n);
    return n;
}

}  // namespace etude::engine
