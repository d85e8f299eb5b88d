// What a processor costs per batch, and how large it lets batches grow.
// A launch costs the same whatever it carries (kernel launches, barriers,
// the host's turn-around); the frames cost in proportion. That is the shape
// that makes batching pay on a GPU: the launch is shared by every unit in
// the batch. The executor estimates both from the batches it has timed
// (latency_estimator.h's way); a simulated device is given them.
#pragma once

#include <cmath>
#include <cstdint>

namespace etude::engine::executor {

struct BatchCost {
    std::int64_t launch_ns = 0;  // per batch
    double frame_ns = 0.0;       // per frame of every unit in it

    std::int64_t of(std::int64_t frames) const {
        return launch_ns +
               static_cast<std::int64_t>(std::llround(frame_ns * static_cast<double>(frames)));
    }
};

// How a processor's batches are formed.
struct BatchRule {
    // The most units in one batch: what the device's memory and the
    // recorded shapes (one per batch bucket) allow. 1 on a CPU worker.
    int max_units = 1;
    // Units due within this of the batch's first join it: a unit due much
    // later is not worth delaying the first for, and runs in a later batch
    // that is still in time for it.
    std::int64_t window_ns = 0;
};

// The real-time streams one processor carries, each needing `unit_frames`
// frames per `unit_audio_s` seconds of audio: full batches, back to back,
// make max_units units per batch time, and only `headroom` (0..1] of the
// processor's time is planned, the rest left for the bursts a deadline
// order absorbs (streams starting together, sentences ending together).
inline int real_time_capacity(const BatchCost& cost, const BatchRule& rule,
                              std::int32_t unit_frames, double unit_audio_s, double headroom) {
    const double batch_s =
        static_cast<double>(cost.of(static_cast<std::int64_t>(rule.max_units) * unit_frames)) *
        1e-9;
    if (batch_s <= 0.0) return 0;
    // Each stream needs one unit per unit_audio_s; a batch time gives max_units.
    return static_cast<int>(std::floor(headroom * rule.max_units * unit_audio_s / batch_s));
}

}  // namespace etude::engine::executor
