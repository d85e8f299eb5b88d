// A device's BatchCost fitted from batches timed on it, and the real-time
// streams that cost lets it carry: what admission uses when a voice's
// decoder runs on a device (Engine::measure_capacity(), engine/capacity.cpp).
#pragma once

#include <cstdint>
#include <span>

#include "engine/executor/batch_cost.h"

namespace etude::engine::executor {

// One timed batch: all its units' frames together, and how long it took.
struct TimedBatch {
    std::int64_t frames = 0;
    std::int64_t ns = 0;
};

// The launch cost and the cost per frame that fit `timings` best (least
// squares). At least two different frame counts are needed (else
// std::invalid_argument). Timings that would give a negative launch cost
// (noise on a device whose launches are cheap) fit the frames alone,
// through zero; timings where larger batches were no slower (a device far
// from full) are priced as the largest batch's cost per frame, all of it
// per frame: an admission never counts on batches larger than it saw paying
// less than nothing.
BatchCost fit_batch_cost(std::span<const TimedBatch> timings);

// What a processor of cost `cost` carries: the largest batch of at most
// `most_units` units (each `unit_frames` frames making `unit_audio_s` of
// audio) that still ends within `headroom` of its units' audio, and the
// real-time streams that batch gives (real_time_capacity()). A processor too
// slow for a single unit in time carries 0 streams (batch_units 1).
struct CarriedStreams {
    int batch_units = 1;
    int streams = 0;
};
CarriedStreams carried_streams(const BatchCost& cost, std::int32_t unit_frames, double unit_audio_s,
                               double headroom, int most_units);

}  // namespace etude::engine::executor
