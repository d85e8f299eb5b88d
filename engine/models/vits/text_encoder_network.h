// A Piper voice's text encoder on a gpu::Backend (CPU, OpenCL, CUDA,
// Vulkan): phoneme ids to the prior's means and log deviations (m_p,
// logs_p) and the hidden signal the duration predictor reads. The same
// network as the host's (text_encoder.cpp, the reference it is tested
// against): the embedding times sqrt(hidden), then per layer multi-head
// attention with relative positions (window `window`, relative embeddings
// shared by the heads) and a feed-forward block of two "same" convolutions
// with a ReLU between them, each added to its input and layer-normed, and
// a final 1x1 projection.
//
// On the device the signal is time-major, [phonemes][hidden]: the 1x1
// convolutions are GEMMs, the layer norms run along rows and the attention
// ops (gpu::Backend::relative_attention_scores/values, softmax_rows) read
// each head's columns in place; only the feed-forward convolutions run
// channel-major (conv1d), between two transposes. The embedding rows are
// gathered on the host (the ids are there) and uploaded, scaled.
//
// The network holds the weights only, uploaded once at construction
// (read-only after it, so any number of threads may encode at once, each
// call on a queue of its own); a call takes its working buffers (a few
// times phonemes x filter_channels floats) from the network's pool. One sentence per call, or
// several of different lengths batched in one: padded to the longest, with
// a mask that keeps each sentence's attention and convolutions to its own
// positions, so each equals its solo encoding to float rounding (bit for
// bit where the ops sum in a fixed order, as the shared kernel bodies do;
// the CPU backend's SGEMMs may block a padded product differently). Not
// real-time safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"
#include "gpu/memory_pool.h"

namespace etude::engine {

class VitsTextEncoderNetwork {
  public:
    // Uploads the encoder's weights (enc_p.*) to `backend`. Throws
    // etude::Error when a weight the encoder needs was released from
    // `weights` (build this before VitsVoice releases the feed-forward
    // convolutions) or the feed-forward kernel is even (its "same" padding
    // would be lopsided, which conv1d does not do); gpu::DeviceError as
    // uploads do.
    VitsTextEncoderNetwork(const VitsWeights& weights, std::shared_ptr<gpu::Backend> backend);
    ~VitsTextEncoderNetwork();

    // One sentence. Throws etude::Error for no ids or an id outside the
    // voice's symbols (check_phoneme_ids), before anything reaches the
    // device.
    VitsEncoding encode(std::span<const std::int64_t> ids) const;
    // Several sentences in one call, each equal to its solo encode().
    std::vector<VitsEncoding> encode(
        std::span<const std::span<const std::int64_t>> sentences) const;

    gpu::Backend& backend() const { return *backend_; }
    const VitsHyperparameters& hp() const { return hp_; }

  private:
    struct Layer;
    struct Work;
    void run_layers(gpu::Queue& q, Work& w) const;

    std::shared_ptr<gpu::Backend> backend_;
    VitsHyperparameters hp_;
    std::vector<float> embedding_;  // [num_symbols][hidden], times sqrt(hidden)
    std::vector<Layer> layers_;
    gpu::DeviceBuffer proj_w_, proj_b_;
    // The calls' working buffers, reused from call to call (thread-safe):
    // a device's allocator is far slower than a sentence's encoding.
    mutable gpu::MemoryPool work_pool_{*backend_};
};

}  // namespace etude::engine
