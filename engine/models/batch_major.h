// A steady batch of streams side by side through one network's stream layers
// (stream_layers.h): the batch's signal is one buffer, [batch][channels]
// [length], from layer to layer, so every operation that is the same for
// each stream (the new input's copy into the windows, the leaky ReLU, the
// convolution, a residual sum) is one backend call for the batch, not one
// per stream. What stays per stream is its own state: the samples each layer
// holds between chunks, copied into the batch's windows and back (two
// copies per stream and layer, where a push of its own issues four or five
// operations per layer and a JointPush seven).
//
// Steady: every layer of every stream settled (stream_layers.h's settled():
// its window full), every stream pushing the same number of samples, none
// flushing. A batch item is then the same computation, on the same values,
// as the stream's own push: on the CPU's direct convolutions its outputs are
// the same bit for bit. The streams' layers are updated (held samples,
// counts) as their own pushes would update them, so any later push, alone,
// joint or replayed from a recording, goes on from where this one left.
//
// Threads: as JointPush: the calls run on `q`, the streams' queues idle.
#pragma once

#include <span>

#include "engine/models/stream_layers.h"

namespace etude::engine {

// A batch's signal: `batch` items of [channels][length], one after another
// in `buffer` from offset 0.
struct BatchSignal {
    gpu::DeviceBuffer* buffer = nullptr;
    int batch = 0, channels = 0, length = 0;
    std::size_t floats() const {
        return static_cast<std::size_t>(batch) * static_cast<std::size_t>(channels) *
               static_cast<std::size_t>(length);
    }
};

struct BatchMajor {
    // The same layer of each stream of the batch (layers[b] takes item b of
    // `in`), all settled: their pushes of in.length samples, not flushing,
    // as one call. The outputs go to `out` (which may be in's buffer), item
    // b stream b's.
    static BatchSignal push(gpu::Queue& q, std::span<WeightedStreamLayer* const> layers,
                            const BatchSignal& in, JointScratch& joint, ScratchBuffer& out);
    // The same for each stream's StreamDelay (all settled); `out` must not
    // be in's buffer.
    static BatchSignal delay(gpu::Queue& q, std::span<StreamDelay* const> delays,
                             const BatchSignal& in, JointScratch& joint, ScratchBuffer& out);
};

}  // namespace etude::engine
