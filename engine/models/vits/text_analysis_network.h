// A Piper voice's text analysis on a gpu::Backend (CPU, OpenCL, CUDA,
// Vulkan): the text encoder (VitsTextEncoderNetwork) and the duration
// predictor (VitsDurationNetwork) of one voice, every speaker, on one
// backend, and the rule that decides whether a sentence's prior is the
// device's or must be the host's. What an engine's Piper stream on a
// device runs per sentence (engine/voices/piper_stream_voice.h).
//
// A sentence's prior is made here only when the device gives it whole and
// unambiguous: the encoder's m_p/logs_p and hidden signal, the log
// durations from them, rounded up on the host (VitsTextToLatent::prior with
// a VitsLogDurations). Otherwise the caller's host path makes the whole
// sentence, encoder and durations (prior() says why, and leaves the
// caller's generator as it was, so the host draws the same noise):
// - a device error anywhere in it (the backend is marked failed; the
//   caller's breaker decides when to try again);
// - a phoneme's scaled duration within VitsTextToLatent::kDurationTieMargin
//   of a whole frame, or a NaN: a float difference of the device's could
//   flip its ceiling, and the host's durations are the ones to give. The
//   host's encoder then runs too (not only its predictor on the device's
//   hidden signal, as VitsVoice::prior does): so the frame counts are the
//   host's own, not the host predictor's on an input a few ulps away.
//
// The networks' weights are uploaded once at construction; read-only after
// it, so any number of threads may call at once (each call on queues of its
// own). Not real-time safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_encoder_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

class VitsAnalysisNetwork {
  public:
    // Uploads the encoder's (enc_p.*) and the predictor's (dp.*) weights to
    // `backend`. Throws etude::Error when one of them was released from
    // `weights` (VitsVoice releases the encoder's feed-forward ones at
    // open: PiperVoice::load_analysis reads them again), gpu::DeviceError
    // as uploads do.
    VitsAnalysisNetwork(const VitsWeights& weights, std::shared_ptr<gpu::Backend> backend);

    enum class Outcome {
        OnDevice,     // the prior is the device's
        NearTie,      // a duration near a tie or NaN: the host makes the sentence
        DeviceError,  // the device failed: the host makes the sentence
    };
    struct Result {
        Outcome outcome = Outcome::OnDevice;
        std::optional<VitsPrior> prior;  // set for OnDevice: complete (no staged durations)
        std::string error;               // the device's message, for DeviceError
    };

    // One sentence's prior, as host.prior(ids, speaker, scales, noise) would
    // make it (`host`: the same voice's VitsTextToLatent, which samples the
    // noise and rounds the durations). `noise` advances as the host's prior
    // would advance it when the prior is made here, and is left untouched
    // otherwise. Throws etude::Error as the host's prior() does (ids,
    // speaker, scales, more than kMaxFrames frames); bad ids before
    // anything reaches the device.
    Result prior(const VitsTextToLatent& host, std::span<const std::int64_t> ids, int speaker,
                 const VitsScales& scales, std::mt19937_64& noise) const;

    // Several streams' sentences could share one call here: both networks
    // take several sentences per call, each equal to its solo result. Not
    // done yet: the duration noise is drawn inside the host's prior(), one
    // sentence at a time, and the streams' analyses run on their own
    // workers; the device executor (issue 41, engine/executor/) is where
    // units of one network due within a window would be gathered into one
    // call.

    gpu::Backend& backend() const { return encoder_.backend(); }

  private:
    VitsTextEncoderNetwork encoder_;
    VitsDurationNetwork durations_;
};

}  // namespace etude::engine
