// A Piper voice's stochastic duration predictor, in reverse, on a
// gpu::Backend (CPU, OpenCL, CUDA, Vulkan): the text encoder's hidden
// signal and the predictor's noise to each phoneme's log duration. The same
// network as the host's (duration_predictor.cpp, the reference it is tested
// against): a 1x1 input convolution (the speaker's conditioning folded
// into its bias), a DDSConv stack (per layer a depthwise dilated
// convolution, layer norm, GELU, a 1x1 convolution, layer norm, GELU, added
// to its input; dilations 1, k, k^2), a 1x1 projection; then the flows
// inverted, each a Flip and a ConvFlow (1x1 convolution of the first noise
// channel plus the projection, its own DDSConv, a 1x1 projection to the
// spline's parameters, gpu::Backend::spline_inverse on the second
// channel); a last Flip and the elementwise affine flow's inverse.
//
// On the device the signal is time-major, [phonemes][hidden]: the 1x1
// convolutions are GEMMs and the layer norms run along rows; only the
// depthwise convolutions run channel-major (conv1d with one group per
// channel) between two transposes. The two noise channels are two buffers,
// so a Flip swaps which is which and costs nothing.
//
// The noise is the host's: the caller draws it from the sentence's
// generator exactly as VitsTextToLatent does (same seed, same numbers) and
// hands it over (in double; the device rounds it to float, one rounding
// the tests' bound covers); the affine flow's last step, (z - m) *
// exp(-logs), is taken on the host in double from the device's z, so the
// log durations come back as the host's type and the durations are
// rounded up there (VitsTextToLatent::prior with a VitsLogDurations).
//
// The network holds the weights only, uploaded once at construction
// (read-only after it: any number of threads may call at once, each call on
// a queue of its own); a call allocates its working buffers (a few times
// phonemes x hidden floats). One sentence per call, or several batched in
// one (log_durations(span<const Sentence>)). Not real-time safe.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

class VitsDurationNetwork {
  public:
    // Uploads the predictor's weights (dp.*) to `backend`. Throws
    // etude::Error when one of them is missing or released, or the
    // depthwise kernel is even (its "same" padding would be lopsided);
    // gpu::DeviceError as uploads do.
    VitsDurationNetwork(const VitsWeights& weights, std::shared_ptr<gpu::Backend> backend);
    ~VitsDurationNetwork();

    // Each phoneme's log duration, from the encoder's output over
    // `encoding.phonemes` phonemes and the noise [2][phonemes] (already
    // times noise_w, as VitsTextToLatent draws it). `speaker` is ignored by
    // a single-speaker voice. Throws etude::Error for an encoding or noise
    // whose sizes do not fit, or a speaker out of range, before anything
    // reaches the device; gpu::DeviceError from the device.
    std::vector<double> log_durations(const VitsEncoding& encoding, std::span<const double> noise,
                                      int speaker) const;

    // Several sentences in one set of launches, each its solo
    // log_durations() (bit for bit where the ops sum in a fixed order, as
    // the shared kernel bodies do; within float rounding on the CPU
    // backend, whose SGEMMs may block a longer product differently): laid
    // end to end, each followed by the widest depthwise padding's zeros
    // (a mask before each depthwise convolution), each with its speaker.
    // The encodings must outlive the call. Throws as log_durations() for
    // any sentence, before anything reaches the device.
    struct Sentence {
        const VitsEncoding* encoding = nullptr;
        std::span<const double> noise;  // [2][phonemes]
        int speaker = 0;
    };
    std::vector<std::vector<double>> log_durations(std::span<const Sentence> sentences) const;

    gpu::Backend& backend() const { return *backend_; }
    const VitsHyperparameters& hp() const { return hp_; }

  private:
    struct Dds;
    struct Flow;
    struct Work;
    void run_dds(gpu::Queue& q, const Dds& d, Work& w, gpu::DeviceBuffer& x) const;

    std::shared_ptr<gpu::Backend> backend_;
    VitsHyperparameters hp_;
    // The input convolution's bias, and per speaker its bias plus the
    // speaker's conditioning (dp.cond of the speaker embedding), on the host.
    std::vector<std::vector<float>> pre_bias_;
    gpu::DeviceBuffer pre_w_, proj_w_, proj_b_;
    std::vector<Dds> dds_;  // the predictor's own, then each flow's
    std::vector<Flow> flows_;
    double affine_m_ = 0, affine_scale_ = 1;  // the elementwise affine flow, channel 0
};

}  // namespace etude::engine
