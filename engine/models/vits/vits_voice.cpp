#include "engine/models/vits/vits_voice.h"

#include <algorithm>
#include <optional>

#include "engine/error.h"
#include "engine/models/vits/vits_decoder.h"

namespace etude::engine {

std::shared_ptr<VitsVoice> VitsVoice::open(const std::string& onnx_path, int sample_rate,
                                           std::shared_ptr<gpu::Backend> backend) {
    if (!backend) throw Error(onnx_path + ": no compute backend to load the voice on");
    if (sample_rate < 8000 || sample_rate > 192000)
        throw Error(onnx_path + ": sample rate " + std::to_string(sample_rate) +
                    " is out of range");
    auto weights = std::make_shared<VitsWeights>(read_vits_weights(onnx_path));
    return std::shared_ptr<VitsVoice>(
        new VitsVoice(onnx_path, sample_rate, std::move(weights), std::move(backend)));
}

VitsVoice::VitsVoice(std::string path, int sample_rate, std::shared_ptr<VitsWeights> weights,
                     std::shared_ptr<gpu::Backend> backend)
    : path_(std::move(path)),
      sample_rate_(sample_rate),
      weights_(weights),
      prior_(weights_),
      backend_(std::move(backend)) {
    // On a device the encoder's and the duration predictor's weights go
    // there too, before the feed-forward ones are released below; the host
    // keeps its own encoder (Winograd's copies) and predictor to cover a
    // device error.
    if (backend_->info().kind != gpu::BackendKind::Cpu) {
        encoder_ = std::make_unique<const VitsTextEncoderNetwork>(*weights, backend_);
        durations_ = std::make_unique<const VitsDurationNetwork>(*weights, backend_);
    }
    // A medium voice's weights are 63 MB of floats; the Winograd copy of
    // the feed-forward convolutions (21 MB of them) and the flow on the
    // backend (28 MB) would hold a second copy each beside them.
    if (const std::string copied = prior_.copied_weights(); !copied.empty())
        weights->release(copied);
    // The first flow is made now, and its weights live on the backend
    // alone. One speaker: it is the one flow there will ever be. More
    // speakers: the others share its weights and fold their embeddings into
    // biases of their own (flow_network()), so of the originals only what
    // that folding reads stays: each WaveNet layer's input bias and the
    // conditioning layers.
    flow_network(0);
    if (weights->hp.num_speakers == 1) {
        weights->release("flow.");
    } else {
        for (const auto& t : weights->tensors)
            if (t.role.rfind("flow.", 0) == 0 && !t.released &&
                !VitsFlowNetwork::folds_a_speaker(t.role))
                weights->release(t.role);
    }
}

std::shared_ptr<const NeuralModel> VitsVoice::decoder(int speaker) const {
    if (num_speakers() == 1) speaker = 0;
    if (speaker < 0 || speaker >= num_speakers())
        throw Error(path_ + ": speaker " + std::to_string(speaker) + " is outside the voice's " +
                    std::to_string(num_speakers()) + " speakers");
    std::lock_guard lock(decoders_mu_);
    if (auto it = decoders_.find(speaker); it != decoders_.end()) return it->second;
    // Another speaker's decoder made already: this one shares its weights
    // (stored once made, as flow_network() stores a flow).
    std::shared_ptr<const NeuralModel> d;
    if (!decoders_.empty()) d = share_vits_decoder(decoders_.begin()->second, *weights_, speaker);
    if (!d) d = load_vits_decoder(*weights_, sample_rate_, speaker, path_, backend_);
    decoders_.emplace(speaker, d);
    return d;
}

std::shared_ptr<const VitsFlowNetwork> VitsVoice::flow_network(int speaker) const {
    const int key = num_speakers() == 1 ? 0 : speaker;
    std::lock_guard lock(flows_mu_);
    if (auto it = flows_.find(key); it != flows_.end()) return it->second;
    // Another speaker's flow made already: this one shares its weights and
    // has biases of its own (28 MB a speaker otherwise, for a medium voice).
    // (Stored once made: a speaker outside the voice throws, leaving none.)
    std::shared_ptr<const VitsFlowNetwork> f =
        flows_.empty()
            ? std::make_shared<const VitsFlowNetwork>(*weights_, key, backend_)
            : std::make_shared<const VitsFlowNetwork>(
                  flows_.begin()->second, VitsFlowNetwork::speaker_biases(*weights_, key));
    flows_.emplace(key, f);
    return f;
}

std::unique_ptr<VitsFlowStream> VitsVoice::open_flow(int speaker) const {
    return std::make_unique<VitsFlowStream>(flow_network(speaker));
}

VitsPrior VitsVoice::prior(std::span<const std::int64_t> ids, int speaker, const VitsScales& scales,
                           std::mt19937_64& noise) const {
    if (encoder_) {
        check_phoneme_ids(weights_->hp, ids);
        std::optional<VitsEncoding> encoding;
        try {
            encoding = encoder_->encode(ids);
        } catch (const gpu::DeviceError&) {
            // The backend is marked failed (its health says why); this
            // sentence's encoder runs on the host below.
        }
        if (encoding) {
            const VitsLogDurations on_device = [&](const VitsEncoding& e,
                                                   std::span<const double> z) {
                try {
                    return durations_->log_durations(e, z, speaker);
                } catch (const gpu::DeviceError&) {
                    return std::vector<double>{};  // the host's predictor makes them
                }
            };
            return prior_.prior(*encoding, speaker, scales, noise, on_device);
        }
    }
    return prior_.prior(ids, speaker, scales, noise);
}

VitsLatent VitsVoice::latent(std::span<const std::int64_t> ids, int speaker,
                             const VitsScales& scales, std::mt19937_64& noise) const {
    VitsPrior p = prior(ids, speaker, scales, noise);
    VitsLatent l;
    l.channels = p.channels();
    l.frames = p.frames();
    l.durations = p.durations();
    l.z = p.sample_all();
    flow_network(speaker)->run(l.z, l.frames);
    return l;
}

std::vector<float> VitsVoice::render(std::span<const std::int64_t> ids, int speaker,
                                     const VitsScales& scales, std::uint64_t seed) const {
    std::mt19937_64 noise(seed);
    const VitsLatent latent = this->latent(ids, speaker, scales, noise);
    return decoder(speaker)->vocode(latent.z, latent.frames);
}

VitsSentenceStream::VitsSentenceStream(std::shared_ptr<const VitsVoice> voice, std::uint64_t seed)
    : voice_(std::move(voice)), noise_(seed) {
    if (!voice_) throw Error("VITS stream: no voice");
}

void VitsSentenceStream::start(std::span<const std::int64_t> ids, int speaker,
                               const VitsScales& scales) {
    prior_ = voice_->prior(ids, speaker, scales, noise_);
    latent_ = VitsLatent{};
    latent_.channels = prior_.channels();
    latent_.frames = prior_.frames();
    latent_.durations = prior_.durations();
    // Filled with the flow's output block by block, as the prior is drawn.
    latent_.z.assign(std::size_t(latent_.channels) * std::size_t(latent_.frames), 0.0f);
    if (!flow_ || flow_speaker_ != speaker) {
        flow_ = voice_->open_flow(speaker);
        flow_speaker_ = speaker;
    }
    flow_->reset();
    decoder_ = std::make_unique<MelVocoderStream>(voice_->decoder(speaker));
    next_frame_ = 0;
    finished_ = false;
}

std::vector<float> VitsSentenceStream::next(int frames) {
    if (!decoder_ || finished_) return {};
    const int n = std::clamp(frames, 0, latent_.frames - next_frame_);
    std::vector<float> out;
    if (n > 0) {
        flow_->run_until(prior_, next_frame_ + n, latent_.z);
        std::vector<float> part;
        copy_mel_frames(latent_.z, latent_.channels, latent_.frames, next_frame_, n, part);
        out = decoder_->push(part, n);
        next_frame_ += n;
    }
    if (next_frame_ >= latent_.frames) {
        const auto rest = decoder_->finish();
        out.insert(out.end(), rest.begin(), rest.end());
        finished_ = true;
    }
    return out;
}

}  // namespace etude::engine
