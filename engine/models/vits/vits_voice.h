// A Piper voice ready to speak phoneme ids: its weights (read from the
// .onnx by structure), the text-to-latent network, and one decoder per
// speaker on one backend. The text front end (espeak-ng phonemes, the
// voice's .onnx.json) lives elsewhere; this takes ids, a speaker id, the
// scales and a seed, and the sample rate the config names.
//
// VitsSentenceStream speaks one sentence at a time in chunks: the encoder
// and the durations run when a sentence starts; each call to next() pushes
// the flow on (VitsFlowStream: incremental, each frame once) as far as
// needed and decodes the next frames with exact context, so the audio streamed equals
// the whole sentence's (the decoder's MelVocoderStream) and first audio
// waits for one block, not the sentence.
// The noise comes from a generator the stream owns, seeded when it is
// made: the same seed and sentences give the same audio, and
// VitsVoice::render() with that seed gives the sentence offline.
//
// Thread safety: a VitsVoice is immutable after open() except its decoder
// cache (guarded); share it between streams. A stream is used from one
// thread. Not real-time safe: runs on compute workers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/flow_network.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/models/vits/text_encoder_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

class VitsVoice {
  public:
    // Throws etude::Error naming the file for an unreadable or unsupported
    // graph, or a sample rate out of range.
    static std::shared_ptr<VitsVoice> open(const std::string& onnx_path, int sample_rate,
                                           std::shared_ptr<gpu::Backend> backend);

    const std::string& path() const { return path_; }
    int sample_rate() const { return sample_rate_; }
    int num_speakers() const { return weights_->hp.num_speakers; }
    int hop() const { return weights_->hp.hop(); }
    const VitsHyperparameters& hyperparameters() const { return weights_->hp; }
    // The weights as read, less those a part of the voice keeps in its own
    // form: the text encoder's feed-forward convolutions (Winograd's), and
    // for a single-speaker voice the flow's (on the backend, built at
    // open). What stays: the encoder's other layers and the duration
    // predictor (run from here on the host), the decoder's (a decoder for
    // another backend, a device tier, is made from them) and a
    // multi-speaker voice's flow (each speaker's flow is made from it).
    const VitsWeights& weights() const { return *weights_; }
    const VitsTextToLatent& text_to_latent() const { return prior_; }
    // The decoder of `speaker` (made and uploaded on first use).
    std::shared_ptr<const NeuralModel> decoder(int speaker) const;
    // The flow of `speaker` (made and uploaded on first use; shared).
    std::shared_ptr<const VitsFlowNetwork> flow_network(int speaker) const;
    // A stream of that flow for one stream's sentences, on its own queue.
    std::unique_ptr<VitsFlowStream> open_flow(int speaker) const;
    // A sentence's prior: the text encoder and the duration predictor on
    // the voice's backend when that is a device (encodes_on_device()), else
    // on the host. A device error while encoding leaves the sentence to the
    // host's encoder and predictor, one in the predictor to the host's
    // predictor (the same result within float rounding, the same frame
    // counts: VitsTextToLatent settles near ties on the host; the noise
    // drawn is the same either way). Throws as VitsTextToLatent::prior.
    VitsPrior prior(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                    std::mt19937_64& noise) const;
    bool encodes_on_device() const { return encoder_ != nullptr; }
    // Phoneme ids to the decoder's input: the prior (above), the flow on
    // the voice's backend.
    VitsLatent latent(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                      std::mt19937_64& noise) const;

    // One sentence offline, with a generator seeded with `seed`: what a
    // VitsSentenceStream made with that seed says for its first sentence.
    std::vector<float> render(std::span<const std::int64_t> ids, int speaker,
                              const VitsScales& scales, std::uint64_t seed) const;

  private:
    // Keeps each weight once (its own part's copy, released from `weights`
    // otherwise): so the weights are writable here, and const once built.
    VitsVoice(std::string path, int sample_rate, std::shared_ptr<VitsWeights> weights,
              std::shared_ptr<gpu::Backend> backend);
    std::string path_;
    int sample_rate_;
    std::shared_ptr<const VitsWeights> weights_;
    VitsTextToLatent prior_;
    std::shared_ptr<gpu::Backend> backend_;
    // The text encoder on backend_ when it is a device; null on the CPU
    // backend, where the host's encoder is faster (fewer, fused passes).
    std::unique_ptr<const VitsTextEncoderNetwork> encoder_;
    // The duration predictor beside it (null where encoder_ is).
    std::unique_ptr<const VitsDurationNetwork> durations_;
    mutable std::mutex decoders_mu_;
    mutable std::map<int, std::shared_ptr<const NeuralModel>> decoders_;
    mutable std::mutex flows_mu_;
    mutable std::map<int, std::shared_ptr<const VitsFlowNetwork>> flows_;
};

class VitsSentenceStream {
  public:
    VitsSentenceStream(std::shared_ptr<const VitsVoice> voice, std::uint64_t seed);

    // Runs the encoder, the durations and the flow for a sentence; the
    // previous sentence, if unfinished, is dropped.
    void start(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales);
    // Decodes up to `frames` more latent frames; returns the audio that
    // became final (the last call, once every frame is in, returns the rest).
    std::vector<float> next(int frames);
    bool done() const { return next_frame_ >= latent_.frames && finished_; }
    int frames() const { return latent_.frames; }
    const std::vector<int>& durations() const { return latent_.durations; }

  private:
    std::shared_ptr<const VitsVoice> voice_;
    std::mt19937_64 noise_;
    VitsLatent latent_;
    std::unique_ptr<MelVocoderStream> decoder_;
    VitsPrior prior_;  // the sentence's prior, drawn as the flow asks
    std::unique_ptr<VitsFlowStream> flow_;
    int flow_speaker_ = -1;
    int next_frame_ = 0;
    bool finished_ = true;
};

}  // namespace etude::engine
