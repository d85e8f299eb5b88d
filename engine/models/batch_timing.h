// A network's real work on its backend, timed as the engine runs it: a
// decoder's streams pushing chunks together (NetworkStream::push_together,
// the joiner's batched path) and one stream's flow pushed as a stream pushes
// it. Admission on a device fits its batch cost from these
// (engine/capacity.cpp, executor/batch_cost_fit.h).
//
// Errors: gpu::DeviceError from the device, as the pushes throw it.
// Not real-time safe; seconds at most on a slow device for small counts.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/models/neural_model.h"
#include "engine/models/vits/flow_network.h"

namespace etude::engine {

// What time_joined_chunks() found: the quickest round, in ns, and whether
// it stopped early because one round took longer than it was allowed.
struct JoinedTiming {
    std::int64_t ns = 0;
    bool cut_short = false;
};

// `units` fresh streams of `decoder` push `chunk_frames`-frame chunks of a
// latent together, round after round: the quickest of `rounds` rounds,
// after two rounds that fill each stream's context and size its buffers (a
// stream's first chunks do not line up with a settled one's, so they would
// not batch). A round (a first one too) longer than `longest_round_ns` ends
// the timing at once with that round's time, cut_short: a device that
// slow (lavapipe with a medium voice: seconds a chunk) is priced by the
// round it took, not waited on for more. Throws std::invalid_argument for
// counts below 1.
JoinedTiming time_joined_chunks(const NeuralModel& decoder, int units, int chunk_frames, int rounds,
                                std::int64_t longest_round_ns);

// One stream of `flow` on its backend: the quickest of `rounds` pushes
// (VitsFlowStream::kMinPush frames each, after its first push, which
// carries the look-ahead), in ns per frame.
double time_flow_frame(std::shared_ptr<const VitsFlowNetwork> flow, int rounds);

}  // namespace etude::engine
