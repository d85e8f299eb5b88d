#include "engine/executor/batch_cost_fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace etude::engine::executor {

BatchCost fit_batch_cost(std::span<const TimedBatch> timings) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    std::int64_t least = 0, most = 0;
    const TimedBatch* largest = nullptr;
    for (const auto& t : timings) {
        if (t.frames <= 0 || t.ns < 0)
            throw std::invalid_argument("fit_batch_cost: a timed batch needs frames > 0, ns >= 0");
        const auto x = static_cast<double>(t.frames), y = static_cast<double>(t.ns);
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
        least = n == 1 ? t.frames : std::min(least, t.frames);
        most = std::max(most, t.frames);
        if (!largest || t.frames > largest->frames) largest = &t;
    }
    if (least == most)
        throw std::invalid_argument("fit_batch_cost: batches of two sizes at least are needed");
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    const double intercept = (sy - slope * sx) / n;
    BatchCost c;
    if (slope <= 0.0) {
        c.frame_ns = static_cast<double>(largest->ns) / static_cast<double>(largest->frames);
    } else if (intercept < 0.0) {
        c.frame_ns = sxy / sxx;
    } else {
        c.launch_ns = std::llround(intercept);
        c.frame_ns = slope;
    }
    return c;
}

CarriedStreams carried_streams(const BatchCost& cost, std::int32_t unit_frames, double unit_audio_s,
                               double headroom, int most_units) {
    // The batch time grows with the batch and the streams it carries do
    // too, so the largest batch in time carries the most.
    for (int b = std::max(most_units, 1); b >= 1; --b) {
        const double batch_s =
            static_cast<double>(cost.of(static_cast<std::int64_t>(b) * unit_frames)) * 1e-9;
        if (batch_s <= headroom * unit_audio_s)
            return {b, real_time_capacity(cost, {b, 0}, unit_frames, unit_audio_s, headroom)};
    }
    return {1, 0};
}

}  // namespace etude::engine::executor
