#include "engine/models/neural_model.h"

#include <algorithm>
#include <stdexcept>

#include "engine/error.h"
#include "engine/models/device_weights.h"
#include "engine/models/hifigan.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/metadata_reader.h"
#include "engine/models/vocos.h"

namespace etude::engine {

std::shared_ptr<NeuralModel> NeuralModel::load(const std::string& path,
                                               std::shared_ptr<gpu::Backend> backend) {
    const LefFile file = LefFile::open(path);
    return load(file, path, std::move(backend));
}

std::shared_ptr<NeuralModel> NeuralModel::load(const LefFile& file, const std::string& label,
                                               std::shared_ptr<gpu::Backend> backend) {
    if (!backend) throw Error(label + ": no compute backend to load the model on");
    std::shared_ptr<NeuralModel> m(new NeuralModel());
    m->label_ = label;
    m->backend_ = std::move(backend);
    const MetadataReader meta(file.metadata_json(), label);
    m->audio_ = read_audio_params(meta);
    auto queue = m->backend_->create_queue();
    WeightLoader loader(file, *m->backend_, *queue);
    if (m->audio_.architecture == "hifigan") {
        m->network_ = make_hifigan_network(meta, m->audio_, loader, *m->backend_, m->left_context_,
                                           m->right_context_);
    } else {
        if (m->audio_.padding != "center")
            meta.fail("padding", "must be 'center' for vocos (the only head padding supported)");
        m->network_ = make_vocos_network(meta, m->audio_, loader, *m->backend_, m->left_context_,
                                         m->right_context_, m->window_);
    }
    loader.finish();
    return m;
}

std::shared_ptr<NeuralModel> NeuralModel::sharing_weights(std::shared_ptr<const NeuralModel> base,
                                                          std::span<const float> input_bias) {
    if (!base) throw std::invalid_argument("NeuralModel::sharing_weights: no model to share");
    auto network = base->network_->sharing_weights(input_bias);
    if (!network) return nullptr;
    std::shared_ptr<NeuralModel> m(new NeuralModel());
    m->audio_ = base->audio_;
    m->label_ = base->label_;
    m->backend_ = base->backend_;
    m->window_ = base->window_;
    m->left_context_ = base->left_context_;
    m->right_context_ = base->right_context_;
    // The model that owns the weights, not `base` where it borrows them too:
    // no chain of models a speaker each, and `base` may go.
    m->weights_owner_ = base->weights_owner_ ? base->weights_owner_ : std::move(base);
    m->network_ = std::move(network);
    return m;
}

int NeuralModel::streaming_latency_samples() const {
    if (audio_.architecture == "vocos") {
        const int half = audio_.n_fft / 2;
        return (right_context_ + (half + audio_.hop - 1) / audio_.hop) * audio_.hop;
    }
    return right_context_ * audio_.hop;
}

void NeuralModel::run(const float* mel, int frames, int first, int count, float* out) const {
    std::lock_guard lock(run_mu_);
    network_->run(mel, frames, first, count, out);
}

std::vector<float> NeuralModel::vocode(std::span<const float> mel, int frames) const {
    if (frames < 0 || mel.size() != static_cast<std::size_t>(frames) * audio_.n_mels)
        throw Error(label_ + ": mel has " + std::to_string(mel.size()) + " values, expected " +
                    std::to_string(audio_.n_mels) + " x frames");
    // shared_ptr aliasing without ownership: the stream lives only in this call.
    MelVocoderStream stream(
        std::shared_ptr<const NeuralModel>(std::shared_ptr<const NeuralModel>(), this));
    // Every frame is here: one run over the whole utterance (push() then
    // finish() would run the last frames' context twice).
    stream.append(mel, frames);
    return stream.finish();
}

void copy_mel_frames(std::span<const float> mel, int n_mels, int frames, int first, int count,
                     std::vector<float>& out) {
    if (first < 0 || count < 0 || first + count > frames ||
        mel.size() != static_cast<std::size_t>(n_mels) * frames)
        throw Error("copy_mel_frames: frames [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") are outside the mel");
    out.resize(static_cast<std::size_t>(count) * n_mels);
    for (int c = 0; c < n_mels; ++c)
        std::copy_n(mel.begin() + static_cast<std::ptrdiff_t>(c) * frames + first, count,
                    out.begin() + static_cast<std::ptrdiff_t>(c) * count);
}

}  // namespace etude::engine
