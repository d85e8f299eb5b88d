#include "engine/voices/piper_voice.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>

#include "engine/error.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/piper/phoneme_ids.h"
#include "engine/piper/voice_catalog.h"
#include "engine/stream_options.h"
#include "engine/streams/idle_memory.h"
#include "gpu/registry.h"

namespace etude::engine {
namespace {

// Voices open in this process, by the canonical path of their .onnx: a
// server opens one stream per request, and reading a medium voice's 60 MB
// graph each time would cost more than speaking a short reply.
std::mutex g_open_mu;
std::map<std::string, std::weak_ptr<const PiperVoice>> g_open;

std::string canonical_or_same(const std::string& path) {
    std::error_code ec;
    auto c = std::filesystem::canonical(path, ec);
    return ec ? path : c.string();
}

// The parts of a voice's weights its text analysis reads: the text
// encoder's, the duration predictor's and the speaker embedding (folded
// into the predictor's input per speaker).
bool analysis_weight(const std::string& role) {
    return role.starts_with("enc_p.") || role.starts_with("dp.") || role.starts_with("emb_g.");
}

// Whether `reread` holds the same analysis weights as `kept` wherever
// `kept` still holds them: a voice file replaced since the voice was
// opened must not give its device another encoder than its host's.
bool same_analysis_weights(const VitsWeights& kept, const VitsWeights& reread) {
    if (kept.tensors.size() != reread.tensors.size()) return false;
    for (std::size_t i = 0; i < kept.tensors.size(); ++i) {
        const VitsTensor &a = kept.tensors[i], &b = reread.tensors[i];
        if (a.role != b.role || a.dims != b.dims) return false;
        if (analysis_weight(a.role) && !a.released && a.values != b.values) return false;
    }
    return true;
}

float checked_scale(const std::string& voice, const char* name, float value) {
    if (const char* must_be = piper_scale_unmet(name, value))
        throw Error(voice + ": " + name + " must be " + must_be + ", not " + std::to_string(value));
    return value;
}

}  // namespace

std::shared_ptr<const PiperVoice> PiperVoice::open(const std::string& name_or_path) {
    const piper::VoiceFiles files = piper::require_voice(name_or_path);
    if (!files.model_present)
        throw Error(files.model_path + ": no such file (the network of the voice configured in " +
                    files.config_path + ")");
    const std::string key = canonical_or_same(files.model_path);
    std::lock_guard lock(g_open_mu);
    if (auto open = g_open[key].lock()) return open;

    piper::VoiceConfig config = piper::read_voice_config(files.config_path);
    auto network = VitsVoice::open(files.model_path, config.sample_rate, gpu::shared_cpu_backend());
    const auto& hp = network->hyperparameters();
    // The config and the graph come from one training run; where they
    // disagree, ids or speakers would index the wrong rows without an error.
    if (config.num_speakers != hp.num_speakers)
        throw Error(files.config_path + ": num_speakers: " + std::to_string(config.num_speakers) +
                    ", but the network " + files.model_path + " has " +
                    std::to_string(hp.num_speakers));
    if (config.num_symbols > hp.num_symbols)
        throw Error(files.config_path + ": num_symbols: " + std::to_string(config.num_symbols) +
                    ", but the network " + files.model_path + " embeds only " +
                    std::to_string(hp.num_symbols));
    if (config.hop_length != hp.hop())
        throw Error(files.config_path + ": hop_length: " + std::to_string(config.hop_length) +
                    ", but the network " + files.model_path + " makes " + std::to_string(hp.hop()) +
                    " samples per frame");
    std::shared_ptr<const PiperVoice> voice(
        new PiperVoice(files.name, std::move(config), std::move(network)));
    g_open[key] = voice;
    // Reading the voice held its whole .onnx (60 MB for a medium voice) and
    // the weights' transient copies, now freed: given back, or a server that
    // loads its voices at start and has no stream end before it is idle
    // would keep them (the trim otherwise comes when a last stream ends).
    give_back_free_memory();
    return voice;
}

PiperVoice::PiperVoice(std::string name, piper::VoiceConfig config,
                       std::shared_ptr<VitsVoice> network)
    : name_(std::move(name)), config_(std::move(config)), network_(std::move(network)) {
    try {
        phonemizer_.emplace(config_);
    } catch (const Error& e) {
        phonemizer_error_ = e.what();
    }
}

int PiperVoice::speaker_id(const std::string& name_or_id) const {
    if (name_or_id.empty()) return config().default_speaker_id;
    return config().speaker_id(name_or_id);
}

std::vector<std::string> PiperVoice::speaker_names() const {
    std::vector<std::string> names(static_cast<std::size_t>(num_speakers()));
    for (std::size_t id = 0; id < names.size(); ++id) names[id] = std::to_string(id);
    for (const auto& [name, id] : config().speaker_id_map)
        if (id >= 0 && static_cast<std::size_t>(id) < names.size()) names[id] = name;
    return names;
}

VitsScales PiperVoice::scales(std::optional<float> noise_scale, std::optional<float> length_scale,
                              std::optional<float> noise_w) const {
    const auto& inference = config().inference;
    VitsScales s;
    s.noise_scale =
        checked_scale(name_, "noise_scale", noise_scale.value_or(inference.noise_scale));
    s.length_scale =
        checked_scale(name_, "length_scale", length_scale.value_or(inference.length_scale));
    s.noise_w = checked_scale(name_, "noise_w", noise_w.value_or(inference.noise_w));
    return s;
}

std::vector<piper::PhonemizedSentence> PiperVoice::phonemize(std::string_view text,
                                                             bool with_words) const {
    if (!phonemizer_) throw Error(phonemizer_error_);
    return phonemizer_->phonemize(text, with_words);
}

void PiperVoice::check_ids(const std::vector<std::int64_t>& ids) const {
    piper::check_phoneme_ids(ids, config());
}

VitsLatent PiperVoice::latent(std::span<const std::int64_t> ids, int speaker,
                              const VitsScales& scales, std::mt19937_64& noise) const {
    return network_->latent(ids, speaker, scales, noise);
}

std::shared_ptr<NeuralModel> PiperVoice::load_decoder(int speaker,
                                                      std::shared_ptr<gpu::Backend> backend) const {
    if (num_speakers() == 1) speaker = 0;
    if (speaker < 0 || speaker >= num_speakers())
        throw Error(model_path() + ": speaker " + std::to_string(speaker) +
                    " is outside the voice's " + std::to_string(num_speakers()) + " speakers");
    const std::pair<int, const gpu::Backend*> key{speaker, backend.get()};
    std::shared_ptr<const NeuralModel> other;  // another speaker's there
    {
        std::lock_guard lock(decoders_mu_);
        if (auto it = decoders_.find(key); it != decoders_.end()) return it->second;
        for (const auto& [k, decoder] : decoders_)
            if (k.second == backend.get()) other = decoder;
    }
    // Another speaker's decoder is on that backend already: this one shares
    // its weights, with this speaker's input bias.
    if (other) {
        if (auto shared = share_vits_decoder(other, network_->weights(), speaker)) {
            std::lock_guard lock(decoders_mu_);
            return decoders_.emplace(key, std::move(shared)).first->second;
        }
    }
    // The decoder as a LEF image, made for this load and let go after it:
    // kept, it held another copy of the decoder's weights (7 MB of resident
    // size with en_US-joe-medium) for as long as the voice, to save making
    // it again for a second backend (a GPU tier), which happens once if at all.
    const std::vector<std::uint8_t> image =
        vits_decoder_lef(network_->weights(), sample_rate(), speaker);
    auto model = NeuralModel::load(LefFile::from_bytes(image, model_path()), model_path(),
                                   std::move(backend));
    // Two streams may have loaded it at once: the first one stored wins.
    std::lock_guard lock(decoders_mu_);
    return decoders_.emplace(key, std::move(model)).first->second;
}

std::shared_ptr<const VitsFlowNetwork> PiperVoice::load_flow(
    int speaker, std::shared_ptr<gpu::Backend> backend) const {
    if (num_speakers() == 1) speaker = 0;
    const auto cpu = network_->flow_network(speaker);  // checks the speaker
    if (!backend || backend.get() == &cpu->backend()) return cpu;
    const std::pair<int, const gpu::Backend*> key{speaker, backend.get()};
    std::shared_ptr<const VitsFlowNetwork> other;  // another speaker's there
    {
        std::lock_guard lock(decoders_mu_);
        if (auto it = flows_.find(key); it != flows_.end()) return it->second;
        for (const auto& [k, flow] : flows_)
            if (k.second == backend.get()) other = flow;
    }
    // Another speaker's flow is on the device already: this one shares its
    // weights, with this speaker's biases (read from the CPU's flow).
    auto flow = other ? std::make_shared<const VitsFlowNetwork>(other, cpu->speaker_biases())
                      : std::make_shared<const VitsFlowNetwork>(*cpu, std::move(backend));
    // Two streams may have loaded it at once: the first one stored wins.
    std::lock_guard lock(decoders_mu_);
    return flows_.emplace(key, std::move(flow)).first->second;
}

std::shared_ptr<const VitsAnalysisNetwork> PiperVoice::load_analysis(
    std::shared_ptr<gpu::Backend> backend) const {
    if (!backend) throw Error(model_path() + ": no backend for the text analysis");
    {
        std::lock_guard lock(decoders_mu_);
        if (auto it = analyses_.find(backend.get()); it != analyses_.end()) return it->second;
    }
    std::shared_ptr<const VitsAnalysisNetwork> analysis;
    {
        VitsWeights weights = read_vits_weights(model_path());
        // The flow's and the decoder's (two thirds of a medium voice's)
        // let go before the upload, which on a device in host memory (PoCL,
        // lavapipe) holds another copy of what stays.
        for (const auto& t : weights.tensors)
            if (!analysis_weight(t.role) && !t.released) weights.release(t.role);
        if (!same_analysis_weights(network_->weights(), weights))
            throw Error(model_path() +
                        ": the file no longer holds the weights the voice was opened with "
                        "(changed on disk?): its text analysis stays on the host");
        analysis = std::make_shared<const VitsAnalysisNetwork>(weights, std::move(backend));
    }
    // The file and the weights read again are freed: given back (as after
    // open()), or the process would keep their pages.
    give_back_free_memory();
    // Two streams may have loaded it at once: the first one stored wins.
    std::lock_guard lock(decoders_mu_);
    return analyses_.emplace(&analysis->backend(), std::move(analysis)).first->second;
}

void PiperVoice::prepare(int speaker) const {
    network_->flow_network(speaker);
    load_decoder(speaker, gpu::shared_cpu_backend());
}

}  // namespace etude::engine
