// A Piper voice's residual-coupling flow, run in reverse on a gpu::Backend
// (CPU, OpenCL, CUDA): the largest part of the work before the decoder.
//
// Each coupling is a WaveNet (gated dilated convolutions, residual and skip
// paths) of one half of the latent, subtracted from the other half. Piper
// flips the latent's channels between couplings; here the flips never move
// data: the latent is kept as two half buffers, and a coupling that Piper
// runs on the flipped latent is uploaded mirrored (input channels of its
// first conv and output channels of its last reversed) and applied with the
// halves' roles swapped. Speaker conditioning (a 1x1 conv of the speaker
// embedding, the same for every frame) folds into the WaveNet biases, so a
// flow is made for one speaker.
//
// Not thread-safe (one workspace); not real-time safe.
#pragma once

#include <memory>
#include <vector>

#include "engine/models/device_weights.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

class VitsFlowNetwork {
  public:
    VitsFlowNetwork(const VitsWeights& weights, int speaker, std::shared_ptr<gpu::Backend> backend);
    ~VitsFlowNetwork();

    // z is [inter_channels][frames], the sampled prior; replaced by the
    // decoder's input.
    void run(std::vector<float>& z, int frames);

  private:
    struct Coupling;
    std::shared_ptr<gpu::Backend> backend_;
    std::unique_ptr<gpu::Queue> queue_;
    int channels_ = 0, hidden_ = 0, kernel_ = 0;
    std::vector<Coupling> couplings_;  // in the order they run (Piper's last first)
    bool ends_flipped_ = false;
    Workspace work_;
};

}  // namespace etude::engine
