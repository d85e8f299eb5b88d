#include "engine/models/vits/vits_voice.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/models/vits/vits_decoder.h"

namespace etude::engine {

std::shared_ptr<VitsVoice> VitsVoice::open(const std::string& onnx_path, int sample_rate,
                                           std::shared_ptr<gpu::Backend> backend) {
    if (!backend) throw Error(onnx_path + ": no compute backend to load the voice on");
    if (sample_rate < 8000 || sample_rate > 192000)
        throw Error(onnx_path + ": sample rate " + std::to_string(sample_rate) +
                    " is out of range");
    auto weights = std::make_shared<const VitsWeights>(read_vits_weights(onnx_path));
    return std::shared_ptr<VitsVoice>(
        new VitsVoice(onnx_path, sample_rate, std::move(weights), std::move(backend)));
}

VitsVoice::VitsVoice(std::string path, int sample_rate, std::shared_ptr<const VitsWeights> weights,
                     std::shared_ptr<gpu::Backend> backend)
    : path_(std::move(path)),
      sample_rate_(sample_rate),
      weights_(std::move(weights)),
      prior_(weights_),
      backend_(std::move(backend)) {}

std::shared_ptr<const NeuralModel> VitsVoice::decoder(int speaker) const {
    if (num_speakers() == 1) speaker = 0;
    if (speaker < 0 || speaker >= num_speakers())
        throw Error(path_ + ": speaker " + std::to_string(speaker) + " is outside the voice's " +
                    std::to_string(num_speakers()) + " speakers");
    std::lock_guard lock(decoders_mu_);
    auto& d = decoders_[speaker];
    if (!d) d = load_vits_decoder(*weights_, sample_rate_, speaker, path_, backend_);
    return d;
}

int VitsVoice::flow_context() const {
    const auto& hp = weights_->hp;
    return hp.flow_couplings * hp.wn_layers * (hp.wn_kernel - 1) / 2;
}

VitsLatent VitsVoice::latent(std::span<const std::int64_t> ids, int speaker,
                             const VitsScales& scales, std::mt19937_64& noise) const {
    VitsLatent l = prior_.sample_prior(ids, speaker, scales, noise);
    std::vector<float> z(l.z.size());
    flow(speaker, l.z, l.frames, 0, l.frames, z);
    l.z = std::move(z);
    return l;
}

void VitsVoice::flow(int speaker, const std::vector<float>& prior, int frames, int first, int count,
                     std::vector<float>& z) const {
    if (count <= 0) return;
    const int channels = weights_->hp.inter_channels;
    const int lo = std::max(0, first - flow_context());
    const int hi = std::min(frames, first + count + flow_context());
    std::vector<float> window;
    copy_mel_frames(prior, channels, frames, lo, hi - lo, window);
    {
        const int key = num_speakers() == 1 ? 0 : speaker;
        std::lock_guard lock(flows_mu_);
        auto& f = flows_[key];
        if (!f) f = std::make_unique<VitsFlowNetwork>(*weights_, key, backend_);
        f->run(window, hi - lo);
    }
    const int width = hi - lo;
    for (int c = 0; c < channels; ++c)
        std::copy_n(window.begin() + std::ptrdiff_t(c) * width + (first - lo), count,
                    z.begin() + std::ptrdiff_t(c) * frames + first);
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
    latent_ = voice_->text_to_latent().sample_prior(ids, speaker, scales, noise_);
    prior_ = latent_.z;  // latent_.z fills with the flow's output block by block
    speaker_ = speaker;
    flowed_ = 0;
    decoder_ = std::make_unique<MelVocoderStream>(voice_->decoder(speaker));
    next_frame_ = 0;
    finished_ = false;
}

std::vector<float> VitsSentenceStream::next(int frames) {
    if (!decoder_ || finished_) return {};
    const int n = std::clamp(frames, 0, latent_.frames - next_frame_);
    std::vector<float> out;
    if (n > 0) {
        if (next_frame_ + n > flowed_) {
            const int count = std::min(std::max(n, kFlowBlock), latent_.frames - flowed_);
            voice_->flow(speaker_, prior_, latent_.frames, flowed_, count, latent_.z);
            flowed_ += count;
        }
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
