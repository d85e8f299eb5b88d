// Everything in a Piper voice before its decoder: phoneme ids to the latent
// frames the HiFi-GAN decoder turns into audio. Text encoder (embedding,
// post-norm transformer with relative-position attention), stochastic
// duration predictor in reverse (DDSConv, rational-quadratic spline flows),
// durations scaled and rounded up, the prior expanded over the frames and
// sampled with noise_scale, and the residual-coupling flow in reverse.
//
// This runs on the host: its convolutions and the attention's products as
// single-precision BLAS GEMMs, as Piper's ONNX Runtime runs them (the
// convolutions sliced in time over the CPU backend's workers, the attention
// one head per worker, the feed-forward convolutions as Winograd F(2, 3)),
// everything around them (residual sums, layer norms, softmax sums,
// splines) in double. It is most of the time before a sentence's first
// audio: the text encoder is a transformer over the whole sentence, so it
// cannot start on part of one. The decoder, by far the most work per
// second of audio, runs on a backend (engine/models/vits/README.md).
//
// Noise comes from the caller's generator, so that a seed reproduces a
// sentence: the duration noise directly, the prior's through a generator
// of the sentence's own seeded from it (VitsPrior), which draws each
// frame's noise only when that frame is asked for. So a sentence's first
// audio does not wait for the noise of its last frames, and the next
// sentence's analysis, which draws from the caller's generator on another
// thread, never races the frames still being drawn. Not real-time safe
// (allocates); runs on compute workers.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/models/vits/vits_weights.h"
#include "engine/models/vits/winograd_conv3.h"

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

// One sentence's prior, ready to sample: each phoneme's mean and log
// standard deviation (the text encoder's projection), the frames each
// lasts, and a generator of the sentence's own. z_p = m + eps exp(logs)
// noise_scale, frame by frame, each frame's channels in order.
class VitsPrior {
  public:
    VitsPrior() = default;
    // stats: [2 * channels][phonemes], the means then the log deviations.
    VitsPrior(int channels, std::vector<double> stats, std::vector<int> durations, int frames,
              double noise_scale, std::uint64_t seed);

    int channels() const { return channels_; }
    int frames() const { return frames_; }
    const std::vector<int>& durations() const { return durations_; }

    // Frames [first, first + count) as [channels][count] into `out`. Frames
    // are drawn in order: `first` must be the frame after the last one
    // drawn (0 at the start), else std::logic_error.
    void sample(int first, int count, float* out);
    // Every frame, [channels][frames] (from the start only).
    std::vector<float> sample_all();

  private:
    int channels_ = 0, frames_ = 0, phonemes_ = 0;
    std::vector<double> stats_;
    std::vector<int> durations_;
    double noise_scale_ = 0;
    std::mt19937_64 noise_;
    std::normal_distribution<double> normal_{0.0, 1.0};       // keeps its spare draw between calls
    int next_frame_ = 0, phoneme_ = 0, left_in_phoneme_ = 0;  // the frame sample() draws next
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

    // Everything before the prior's sampling: the text encoder, the
    // durations (drawing their noise from `noise`), and the prior's own
    // generator seeded with one more draw. The same errors as run().
    VitsPrior prior(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                    std::mt19937_64& noise) const;

    // prior() sampled whole, without the flow: for the flow to run
    // elsewhere (VitsFlowNetwork on a backend).
    VitsLatent sample_prior(std::span<const std::int64_t> ids, int speaker,
                            const VitsScales& scales, std::mt19937_64& noise) const;

    const VitsHyperparameters& hp() const { return w_->hp; }

  private:
    std::vector<double> speaker_vector(int speaker) const;

    std::shared_ptr<const VitsWeights> w_;
    // The encoder's feed-forward convolutions transformed for Winograd's
    // F(2, 3) (conv_1 and conv_2 of each layer); empty for another kernel.
    std::vector<WinogradConv3> ffn_;
};

}  // namespace etude::engine
