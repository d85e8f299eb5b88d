// A stream's chunk of device work recorded once per chunk length and
// replayed after (gpu::Backend::record/replay): one submission of a Vulkan
// command buffer or a CUDA graph in place of a few hundred launches.
//
// What makes a chunk replayable: a recording freezes the shapes, the host
// values and the buffers of its operations. So
// - the layers' state must stay put: a stream layer is replayed only once
//   it is settled (stream_layers.h: its window full, its delay holding its
//   samples, an upsampler past its left padding); from then on a chunk of
//   N frames issues the same operations on the same buffers every time.
//   The first chunks of an utterance and its flush run op by op.
// - the chunk-sized buffers must stay put: in place of the network's
//   ScratchLender (which lends any set for each push, and grows it when a
//   chunk is longer), each chunk length gets a set of its own, swapped into
//   the stream's ScratchBuffers for its pushes. Its first settled chunk runs
//   op by op on it, which sizes it (a buffer that grew inside a recording
//   would leave the recording on freed memory); its second is recorded.
// - host memory stays out: the input is copied into the set's input buffer
//   before the replay, the output copied out after it.
// - host-side counts a push would move on (an upsampler's totals) are
//   moved on by the caller's `advance` after each replay.
// Only where the backend replays natively: elsewhere (CPU, OpenCL) a
// replay would call the same operations one by one, for nothing.
//
// Memory: a set per chunk length (up to kMaxLengths; other lengths run op by
// op), held for the stream's life: for a Piper medium voice about 10 MB at
// 32 frames. Threads: the stream's producer only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/models/stream_layers.h"
#include "engine/models/vocoder_network.h"
#include "gpu/backend.h"

namespace etude::engine {

class RecordedSteps {
  public:
    static constexpr std::size_t kMaxLengths = 8;
    // `buffers`: the stream's chunk-sized buffers, empty between pushes
    // (a set is swapped into them for each push).
    RecordedSteps(gpu::Backend& backend, std::vector<ScratchBuffer*> buffers);
    ~RecordedSteps();
    RecordedSteps(const RecordedSteps&) = delete;
    RecordedSteps& operator=(const RecordedSteps&) = delete;

    // Whether the stream's chunks replay: on a backend that replays
    // natively (Vulkan, CUDA), until a recording says it does not.
    bool enabled() const { return native_; }

    // One settled chunk of `length` frames on `q`: `stage_input` copies the
    // chunk into the stream's buffers, `body` issues the device work and
    // says where its output lies, `take_output` copies it out; `advance`
    // moves host-side counts on as `body` would have. Runs op by op (the
    // first time, or when a `body` moved a buffer), records, or replays.
    // False, having done nothing, when no set is free for `length`.
    // The caller synchronizes `q` afterwards, also after an exception.
    struct Step {
        std::function<void(gpu::Queue&)> stage_input;
        std::function<SignalRef(gpu::Queue&)> body;
        std::function<void(gpu::Queue&, const SignalRef&)> take_output;
        std::function<void()> advance;
    };
    bool run(gpu::Queue& q, int length, const Step& step);

    ReplayStats stats() const { return stats_; }

  private:
    struct Slot;
    Slot* slot_for(int length);
    std::vector<void*> handles() const;

    gpu::Backend& backend_;
    std::vector<ScratchBuffer*> buffers_;
    std::vector<std::unique_ptr<Slot>> slots_;
    ReplayStats stats_;
    bool native_ = false;
};

}  // namespace etude::engine
