// Everything in a Piper voice before its decoder: phoneme ids to the latent
// frames the HiFi-GAN decoder turns into audio. Text encoder (embedding,
// post-norm transformer with relative-position attention), stochastic
// duration predictor in reverse (DDSConv, rational-quadratic spline flows),
// durations scaled and rounded up, the prior expanded over the frames and
// sampled with noise_scale, and the residual-coupling flow in reverse.
//
// This runs on the host: its convolutions and the attention's products as
// BLAS GEMMs (the convolutions in single precision, as Piper's ONNX Runtime
// runs them, sliced over the CPU backend's workers; the attention in
// double), everything around them (residual sums, layer norms, softmax,
// splines) in double. It is most of the time before a sentence's first
// audio: the text encoder is a transformer over the whole sentence, so it
// cannot start on part of one. The decoder, by far the most work per
// second of audio, runs on a backend (engine/models/vits/README.md).
//
// Noise comes from the caller's generator, so that a seed reproduces a
// sentence. Not real-time safe (allocates); runs on compute workers.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/models/vits/vits_weights.h"

namespace etude::engine {

struct VitsScales {
    float noise_scale = 0.667f;
    float length_scale = 1.0f;
    float noise_w = 0.8f;
};

struct VitsLatent {
    int channels = 0;  // inter_channels
    int frames = 0;
    std::vector<float> z;        // [channels][frames], the decoder's input
    std::vector<int> durations;  // frames per phoneme id (rounded up)
};

class VitsTextToLatent {
  public:
    // At most this many frames per sentence (about 20 minutes at 22050 Hz
    // with a hop of 256): more is refused.
    static constexpr int kMaxFrames = 100000;

    explicit VitsTextToLatent(std::shared_ptr<const VitsWeights> weights);

    // `speaker` is ignored by single-speaker voices; throws etude::Error for
    // no ids, an id outside the embedding table, a speaker out of range,
    // negative or non-finite scales (length_scale must be positive), or
    // durations adding up to more than kMaxFrames.
    VitsLatent run(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                   std::mt19937_64& noise) const;

    // The same without the flow (with_flow false): the sampled prior, for
    // the flow to run elsewhere (VitsFlowNetwork on a backend).
    VitsLatent sample_prior(std::span<const std::int64_t> ids, int speaker,
                            const VitsScales& scales, std::mt19937_64& noise,
                            bool with_flow = false) const;

    const VitsHyperparameters& hp() const { return w_->hp; }

  private:
    std::shared_ptr<const VitsWeights> w_;
};

}  // namespace etude::engine
