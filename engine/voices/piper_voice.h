// A Piper voice as the engine's streams speak it: its files found by path or
// by name (piper/voice_catalog.h), its config and text front end (piper/),
// and its network (models/vits/): the streams of one speaker share its flow
// and its decoder on each backend (load_flow, load_decoder), each running
// them through state of its own, and the streams on one device share the
// text analysis there (load_analysis); on the CPU the text-to-latent part
// runs on the host (VitsTextToLatent).
//
// open() reads a voice once per process: streams of the same file share it
// for as long as one of them holds it.
//
// Thread safety: immutable after open(); every method may be called from
// any thread (the phonemizer serialises espeak-ng; each stream runs the
// flow through a VitsFlowStream of its own).
// Not real-time safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/models/lef_file.h"
#include "engine/models/neural_model.h"
#include "engine/models/vits/text_analysis_network.h"
#include "engine/models/vits/vits_voice.h"
#include "engine/piper/phonemizer.h"
#include "engine/piper/voice_config.h"
#include "gpu/backend.h"

namespace etude::engine {

class PiperVoice {
  public:
    // A path (VOICE.onnx with VOICE.onnx.json beside it, or the .json) or a
    // name in the voice folders. Throws etude::Error naming the file and the
    // field for a voice that is missing, malformed, or whose network and
    // config disagree (speakers, symbols, hop).
    static std::shared_ptr<const PiperVoice> open(const std::string& name_or_path);

    const std::string& name() const { return name_; }
    const std::string& model_path() const { return network_->path(); }
    const piper::VoiceConfig& config() const { return config_; }
    int sample_rate() const { return network_->sample_rate(); }
    int num_speakers() const { return network_->num_speakers(); }
    // Latent channels per frame and samples per frame of the decoder.
    int channels() const { return network_->hyperparameters().inter_channels; }
    int hop() const { return network_->hop(); }

    // A speaker by name (speaker_id_map) or number; "" is the voice's
    // default speaker. Throws etude::Error naming the voice otherwise.
    int speaker_id(const std::string& name_or_id) const;
    // Every speaker's name, by id (a number where the map names none).
    std::vector<std::string> speaker_names() const;
    // The scales of the config's "inference" object, each replaced by the
    // caller's where given. Throws etude::Error for a negative or non-finite
    // scale, or a length_scale of 0.
    VitsScales scales(std::optional<float> noise_scale, std::optional<float> length_scale,
                      std::optional<float> noise_w) const;

    // Sentences of text with their phoneme ids (Piper's front end). Throws
    // etude::Error when the front end cannot run (a build without
    // espeak-ng, or a phoneme type it does not produce): phoneme ids still
    // can be spoken.
    std::vector<piper::PhonemizedSentence> phonemize(std::string_view text,
                                                     bool with_words = false) const;
    // Throws etude::Error naming the voice for an id outside its symbols.
    void check_ids(const std::vector<std::int64_t>& ids) const;
    // Phoneme ids to the decoder's input, noise from `noise`.
    VitsLatent latent(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                      std::mt19937_64& noise) const;
    // The decoder of `speaker` on `backend`: one per speaker and backend,
    // made on first use and shared by every stream (each stream runs it
    // through state of its own: NeuralModel::open_stream). On the CPU,
    // copying the weights anew took 2.7 ms of each new server stream's
    // first audio, and as much memory again per stream; on a GPU, streams
    // that share a decoder have their chunks batched (models/stream_joiner.h).
    std::shared_ptr<NeuralModel> load_decoder(int speaker,
                                              std::shared_ptr<gpu::Backend> backend) const;
    // The flow of `speaker` on `backend`: on the CPU backend the network's
    // own; on a device, one per speaker and device, copied from it on first
    // use and shared by every stream there (each runs it through a
    // VitsFlowStream of its own), as load_decoder() shares the decoder.
    // Throws gpu::DeviceError when the device fails the upload.
    std::shared_ptr<const VitsFlowNetwork> load_flow(int speaker,
                                                     std::shared_ptr<gpu::Backend> backend) const;
    // The text encoder and the duration predictor on `backend` (a device):
    // one per device, made on first use and shared by every stream there
    // (each sentence's call runs on queues of its own). The voice keeps the
    // encoder's feed-forward weights only as the host's Winograd copies
    // (the originals, 21 MB for a medium voice, are released at open), so
    // the first load reads the voice's .onnx again for them (once per
    // device, a transient copy of the weights, let go after the upload)
    // rather than every process holding them for a device it may never
    // use. Throws etude::Error when the file cannot be read again or no
    // longer holds the weights the voice was opened with (changed on
    // disk), gpu::DeviceError when the device fails the upload.
    std::shared_ptr<const VitsAnalysisNetwork> load_analysis(
        std::shared_ptr<gpu::Backend> backend) const;
    // Makes now what the first stream of `speaker` would make when it is
    // created: the flow's network and the decoder on the CPU backend.
    // About 200 ms for a medium voice, which a server's first request would
    // otherwise wait for (Engine::Options::preload_voices calls it).
    void prepare(int speaker) const;
    // The network itself (for offline rendering and tests).
    const VitsVoice& network() const { return *network_; }

  private:
    PiperVoice(std::string name, piper::VoiceConfig config, std::shared_ptr<VitsVoice> network);
    std::string name_;
    piper::VoiceConfig config_;
    std::optional<piper::Phonemizer> phonemizer_;
    std::string phonemizer_error_;        // why there is none
    std::shared_ptr<VitsVoice> network_;  // on the CPU backend
    mutable std::mutex decoders_mu_;      // guards decoders_
    // By speaker and backend (the registry opens one backend per device).
    mutable std::map<std::pair<int, const gpu::Backend*>, std::shared_ptr<NeuralModel>> decoders_;
    // Device flows, by speaker and backend (guarded by decoders_mu_).
    mutable std::map<std::pair<int, const gpu::Backend*>, std::shared_ptr<const VitsFlowNetwork>>
        flows_;
    // Device text analyses, by backend (guarded by decoders_mu_).
    mutable std::map<const gpu::Backend*, std::shared_ptr<const VitsAnalysisNetwork>> analyses_;
};

}  // namespace etude::engine
