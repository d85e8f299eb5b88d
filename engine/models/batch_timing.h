// A network's real work on its backend, timed as the engine runs it: a
// decoder's streams pushing chunks together (NetworkStream::push_together,
// the joiner's batched path) and a Piper flow's streams pushing blocks
// together (VitsFlowStream::push_block_together, its joiner's). Admission
// on a device fits its batch cost from these (engine/capacity.cpp,
// executor/batch_cost_fit.h).
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

// `units` fresh streams of `flow` push `push_frames`-frame blocks of a
// prior together (VitsFlowStream::push_block_together, the batched path
// the flow's joiner runs), round after round, timed as time_joined_chunks()
// times a decoder's: the quickest of `rounds` rounds after two that fill
// the streams' held frames, a round longer than `longest_round_ns` ending
// the timing, cut_short. Throws std::invalid_argument for counts below 1.
JoinedTiming time_joined_flow(std::shared_ptr<const VitsFlowNetwork> flow, int units,
                              int push_frames, int rounds, std::int64_t longest_round_ns);

}  // namespace etude::engine
