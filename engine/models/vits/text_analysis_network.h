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
// Batches: where the network's streams join (joiner(), on a GPU), the
// sentences of streams analysed at the same time on their own threads go
// to the device together (models/stream_joiner.h: a sentence that comes
// while a batch runs waits for it and goes in the next one): one encoder
// call and one duration call for all of them, each sentence equal to its
// solo analysis (both networks take several sentences per call). Each
// stream draws its predictor's noise on its own thread before it joins, on
// a copy of its generator, exactly as the host's prior() would draw it
// (VitsTextToLatent::duration_noise); the prior is then made on its own
// thread from the batch's output, and the copy kept only for a prior made
// here. So the rule above holds per sentence: a near tie in one sentence
// sends that one alone to the host; a device error reaches every sentence
// of the batch (named as the batch's), and each is made on the host.
//
// The networks' weights are uploaded once at construction; read-only after
// it, so any number of threads may call at once (each call on queues of its
// own). Not real-time safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/models/stream_joiner.h"
#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_encoder_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

// One sentence's part in a batch of analyses: what the device calls read,
// and where the batch leaves its results (the caller's, which waits).
struct VitsAnalysisPush {
    std::span<const std::int64_t> ids;
    int speaker = 0;
    std::span<const double> noise;  // the predictor's, [2][phonemes], times noise_w
    VitsEncoding* encoding = nullptr;
    std::vector<double>* log_durations = nullptr;
    std::size_t* batch = nullptr;  // the sentences in the batch
};

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
        std::size_t batch = 0;           // sentences in its device calls (1: alone; 0: failed)
    };

    // One sentence's prior, as host.prior(ids, speaker, scales, noise) would
    // make it (`host`: the same voice's VitsTextToLatent, which samples the
    // noise and rounds the durations). `noise` advances as the host's prior
    // would advance it when the prior is made here, and is left untouched
    // otherwise. `batching`: which of the network's joiners the sentence
    // joins, where it joins (live streams' or offline readers'; Alone: none).
    // Throws etude::Error as the host's prior() does (ids, speaker, scales,
    // more than kMaxFrames frames); bad arguments before anything reaches
    // the device or a batch.
    Result prior(const VitsTextToLatent& host, std::span<const std::int64_t> ids, int speaker,
                 const VitsScales& scales, std::mt19937_64& noise,
                 Batching batching = Batching::Join) const;

    // Whether the streams' sentences, analysed on their own threads, meet
    // in batches: on by default on a GPU, off on the CPU (as the flow's:
    // stream_joiner.h says why). A setting of how the streams run, so the
    // shared (const) network takes it. joiner() is null while off; live
    // streams and offline readers have one each (Alone: none).
    void set_join_streams(bool on) const { join_ = on; }
    PushJoiner<VitsAnalysisPush>* joiner(Batching kind = Batching::Join) const {
        if (!join_ || kind == Batching::Alone) return nullptr;
        return kind == Batching::JoinOffline ? &offline_ : &live_;
    }

    gpu::Backend& backend() const { return encoder_.backend(); }

  private:
    // The device calls of a batch: one encoder call and one duration call
    // for every sentence in it (each sentence's own where it is alone).
    void run(std::span<const VitsAnalysisPush> batch) const;

    VitsTextEncoderNetwork encoder_;
    VitsDurationNetwork durations_;
    mutable std::atomic<bool> join_{false};
    // On the device's lanes, beside its flow's and decoder's joiners.
    mutable PushJoiner<VitsAnalysisPush> live_{DeviceLane::shared(&encoder_.backend(), 0)};
    mutable PushJoiner<VitsAnalysisPush> offline_{
        DeviceLane::shared(&encoder_.backend(), rt::kOfflineNice)};
};

}  // namespace etude::engine
