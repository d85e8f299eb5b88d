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
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/models/vits/vits_weights.h"
#include "engine/models/vits/winograd_conv3.h"

namespace etude::engine {

struct VitsScales {
    float noise_scale = 0.667f;
    float length_scale = 1.0f;
    float noise_w = 0.8f;
};

// The text encoder's output for one sentence (VitsTextToLatent::encode on
// the host, VitsTextEncoderNetwork::encode on a backend).
struct VitsEncoding {
    int phonemes = 0;
    std::vector<float> hidden;  // [hidden_channels][phonemes]: the duration predictor's input
    std::vector<float> stats;   // [2 * inter_channels][phonemes]: m_p, then logs_p
};

// Throws etude::Error for no ids or an id outside the voice's embedding
// table: what every entry that takes a sentence's ids checks first.
void check_phoneme_ids(const VitsHyperparameters& hp, std::span<const std::int64_t> ids);

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
//
// A staged prior (VitsTextToLatent::prior with PriorDurations::Staged)
// knows only its first phonemes' durations until complete_durations() is
// called: until then frames() and durations() cover those phonemes alone.
class VitsPrior {
  public:
    VitsPrior() = default;
    // stats: [2 * channels][phonemes], the means then the log deviations.
    VitsPrior(int channels, std::vector<double> stats, std::vector<int> durations, int frames,
              double noise_scale, std::uint64_t seed);

    int channels() const { return channels_; }
    // The sentence's frames; while durations are pending, the frames of
    // the phonemes whose durations are known (fewer than the sentence's).
    int frames() const { return frames_; }
    const std::vector<int>& durations() const { return durations_; }

    // False while a staged prior's later durations are still to be made.
    bool complete() const { return !pending_; }
    // Makes the rest of a staged prior's durations (nothing for a complete
    // one): the duration predictor over the whole sentence, on this thread.
    // Throws etude::Error, as VitsTextToLatent::prior does, when the
    // durations add up to more than VitsTextToLatent::kMaxFrames.
    void complete_durations();

    // Frames [first, first + count) as [channels][count] into `out`. Frames
    // are drawn in order: `first` must be the frame after the last one
    // drawn (0 at the start), else std::logic_error.
    void sample(int first, int count, float* out);
    // Every frame, [channels][frames] (from the start only).
    std::vector<float> sample_all();

  private:
    friend class VitsTextToLatent;
    struct PendingDurations;  // what complete_durations() needs (text_to_latent.cpp)

    int channels_ = 0, frames_ = 0, phonemes_ = 0;
    std::vector<double> stats_;
    std::vector<int> durations_;
    double noise_scale_ = 0;
    std::mt19937_64 noise_;
    std::normal_distribution<double> normal_{0.0, 1.0};       // keeps its spare draw between calls
    int next_frame_ = 0, phoneme_ = 0, left_in_phoneme_ = 0;  // the frame sample() draws next
    std::shared_ptr<PendingDurations> pending_;               // null once every duration is known
};

// How VitsTextToLatent::prior makes the durations. Whole: all of them before
// it returns. Staged: for a long sentence, only the first
// VitsTextToLatent::kStagedPhonemes phonemes' (from the duration predictor
// run over just enough of the sentence to make them exactly), the rest when
// the prior's complete_durations() is called: so a sentence's first audio
// waits for a fraction of the predictor. The durations are the same either
// way (the predictor is convolutional, its reach known; a test checks), to
// float rounding: OpenBLAS's sums for a column can differ in the last bit
// with the slice it is in (as with the thread count), which moves a
// duration only where it lies within that of a whole frame.
enum class PriorDurations { Whole, Staged };

// Log durations made elsewhere (a device's VitsDurationNetwork): from the
// encoding and the predictor's noise ([2][phonemes], times noise_w, drawn
// from the caller's generator as the host's predictor draws it), each
// phoneme's log duration; an empty result leaves them to the host (a
// device error).
using VitsLogDurations =
    std::function<std::vector<double>(const VitsEncoding&, std::span<const double> noise)>;

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

    // A staged prior knows this many phonemes' durations at first (about
    // 100 frames of speech, more than the flow's first two pushes need).
    static constexpr int kStagedPhonemes = 48;

    // Everything before the prior's sampling: the text encoder, the
    // durations (drawing their noise from `noise`; `durations` says whether
    // all of them now or the first ones), and the prior's own generator
    // seeded with one more draw. The same errors as run(). `noise` is left
    // as a whole prior leaves it either way.
    VitsPrior prior(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                    std::mt19937_64& noise, PriorDurations durations = PriorDurations::Whole) const;

    // Throws etude::Error as prior() does for its arguments (no ids, an id
    // outside the embedding table, a speaker out of range, bad scales),
    // before any work: what a caller that batches several streams'
    // sentences checks first, so that one sentence's bad argument fails
    // only its own.
    void check_arguments(std::span<const std::int64_t> ids, int speaker,
                         const VitsScales& scales) const;
    // The duration predictor's noise for a sentence of `phonemes`,
    // [2][phonemes] times noise_w: the first draws prior() takes from
    // `noise`, the same numbers in the same order (a device's predictor is
    // handed them before the prior is made: VitsAnalysisNetwork).
    static std::vector<double> duration_noise(int phonemes, const VitsScales& scales,
                                              std::mt19937_64& noise);

    // The text encoder alone, on the host (float GEMMs, double sums), as
    // prior() runs it: the reference a backend's encoder
    // (VitsTextEncoderNetwork) is tested against. Throws as
    // check_phoneme_ids().
    VitsEncoding encode(std::span<const std::int64_t> ids) const;

    // The same from a sentence already encoded (by VitsTextToLatent::encode,
    // or on a backend by VitsTextEncoderNetwork): the durations and the
    // prior from the encoder's output. Throws etude::Error for an encoding
    // whose sizes do not fit this voice, and as prior() for the scales,
    // the speaker and the durations.
    VitsPrior prior(const VitsEncoding& encoding, int speaker, const VitsScales& scales,
                    std::mt19937_64& noise, PriorDurations durations = PriorDurations::Whole) const;
    // The same with every duration from `log_durations` (whole, none
    // staged), rounded up here in double. Where a phoneme's scaled duration
    // lies within kDurationTieMargin (relative) of a whole frame, a float
    // difference of the device's could move its ceiling: the host's
    // predictor then makes the sentence's durations (as for a NaN), so a
    // device whose log durations stay within the margin of the host's (the
    // test voices' do, on every device tested) gives the host's frame
    // counts for the same noise.
    VitsPrior prior(const VitsEncoding& encoding, int speaker, const VitsScales& scales,
                    std::mt19937_64& noise, const VitsLogDurations& log_durations) const;
    // At least twice a device's difference from the host in the log
    // durations (at most 4.4e-5 for the test voices on the CPU backend,
    // PoCL and lavapipe: tests/engine/models/
    // vits_duration_network_test.cpp), and small enough to cost little:
    // about 2 * margin * frames of a phoneme's chance to fall this near a
    // tie (a sentence of 35 phonemes of 5 frames: 1 in 10 goes to the host).
    static constexpr double kDurationTieMargin = 2.5e-4;
    // Whether a phoneme's scaled duration, exp(logw) * length_scale frames,
    // lies within kDurationTieMargin (relative) of a whole frame, or is NaN:
    // where log durations made elsewhere go to the host's predictor.
    static bool near_a_duration_tie(std::span<const double> logw, double length_scale);

    // Phonemes either side that one phoneme's duration depends on: the
    // duration predictor's convolutions' reach (each DDSConv's dilated
    // kernels, once before its flows and once in each).
    int duration_reach() const;

    // prior() sampled whole, without the flow: for the flow to run
    // elsewhere (VitsFlowNetwork on a backend).
    VitsLatent sample_prior(std::span<const std::int64_t> ids, int speaker,
                            const VitsScales& scales, std::mt19937_64& noise) const;

    const VitsHyperparameters& hp() const { return w_->hp; }

    // The role prefix of the weights this keeps in its own form (the
    // feed-forward convolutions transformed for Winograd), or "" for none:
    // the owner of the weights may release them (VitsWeights::release).
    std::string copied_weights() const;

  private:
    struct EncodedSentence;  // the encoder's output in double (text_to_latent.cpp)
    VitsPrior prior_of(EncodedSentence&& e, int speaker, const VitsScales& scales,
                       std::mt19937_64& noise, PriorDurations durations,
                       const VitsEncoding* encoding = nullptr,
                       const VitsLogDurations* log_durations = nullptr) const;
    EncodedSentence checked(const VitsEncoding& encoding, const VitsScales& scales) const;
    std::vector<double> speaker_vector(int speaker) const;

    std::shared_ptr<const VitsWeights> w_;
    // The encoder's feed-forward convolutions transformed for Winograd's
    // F(2, 3) (conv_1 and conv_2 of each layer); empty for another kernel.
    std::vector<WinogradConv3> ffn_;
};

}  // namespace etude::engine
