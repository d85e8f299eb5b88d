#include "engine/models/vits/vits_decoder.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/models/lef_file.h"

namespace etude::engine {

std::vector<float> vits_decoder_input_bias(const VitsWeights& w, int speaker) {
    const auto& hp = w.hp;
    const auto& pre = w.get("dec.conv_pre.bias").values;
    if (hp.num_speakers <= 1) return pre;
    if (speaker < 0 || speaker >= hp.num_speakers)
        throw Error("VITS decoder: speaker " + std::to_string(speaker) +
                    " is outside the voice's " + std::to_string(hp.num_speakers) + " speakers");
    // bias + cond.weight . g + cond.bias, in double.
    const auto& cw = w.get("dec.cond.weight").values;
    const auto& cb = w.get("dec.cond.bias").values;
    const auto& emb = w.get("emb_g.weight").values;
    const std::size_t gin = std::size_t(hp.gin_channels);
    std::vector<float> bias(pre.size());
    for (std::size_t o = 0; o < bias.size(); ++o) {
        double acc = double(pre[o]) + cb[o];
        for (std::size_t i = 0; i < gin; ++i)
            acc += double(cw[o * gin + i]) * emb[std::size_t(speaker) * gin + i];
        bias[o] = float(acc);
    }
    return bias;
}

std::vector<std::uint8_t> vits_decoder_lef(const VitsWeights& w, int sample_rate, int speaker) {
    const auto& hp = w.hp;
    if (sample_rate < 8000 || sample_rate > 192000)
        throw Error("VITS decoder: sample rate " + std::to_string(sample_rate) +
                    " is out of range");
    const int hop = hp.hop();
    nlohmann::json meta = {{"architecture", "hifigan"},
                           {"sample_rate", sample_rate},
                           {"n_fft", std::max(4 * hop, 16)},
                           {"hop", hop},
                           {"win_length", std::max(4 * hop, 16)},
                           {"window", "hann"},
                           {"n_mels", hp.inter_channels},
                           {"fmin", 0.0},
                           {"fmax", sample_rate / 2.0},
                           {"mel_scale", "slaney"},
                           {"mel_norm", "slaney"},
                           {"mel_power", 1.0},
                           {"log_floor", 1e-5},
                           {"magnitude_eps", 1e-9},
                           {"padding", "reflect_half"},
                           {"converted_from", "Piper VITS decoder"},
                           {"hyperparameters",
                            {{"resblock", hp.resblock == '1' ? 1 : 2},
                             {"upsample_rates", hp.upsample_rates},
                             {"upsample_kernel_sizes", hp.upsample_kernels},
                             {"upsample_initial_channel", hp.upsample_initial_channel},
                             {"resblock_kernel_sizes", hp.resblock_kernels},
                             {"resblock_dilation_sizes", hp.resblock_dilations},
                             {"conv_pre_kernel", w.get("dec.conv_pre.weight").dims[2]},
                             {"conv_post_kernel", w.get("dec.conv_post.weight").dims[2]},
                             {"leaky_relu_slope", 0.1},
                             {"final_leaky_relu_slope", 0.01}}}};
    LefWriter lef(meta.dump());
    const auto add = [&](const std::string& name, const std::vector<std::int64_t>& dims,
                         std::span<const float> values) {
        std::vector<std::uint64_t> shape(dims.begin(), dims.end());
        lef.add_f32(name, shape, values);
    };
    for (const auto& t : w.tensors) {
        if (t.role.rfind("dec.", 0) != 0 || t.role.rfind("dec.cond.", 0) == 0) continue;
        const std::string name = t.role.substr(4);
        if (name == "conv_pre.bias") {
            add(name, t.dims, vits_decoder_input_bias(w, speaker));
            continue;
        }
        add(name, t.dims, t.values);
    }
    const std::vector<float> zero{0.0f};
    add("conv_post.bias", {1}, zero);  // Piper's output conv has none
    return lef.bytes();
}

std::shared_ptr<NeuralModel> load_vits_decoder(const VitsWeights& weights, int sample_rate,
                                               int speaker, const std::string& label,
                                               std::shared_ptr<gpu::Backend> backend) {
    const auto bytes = vits_decoder_lef(weights, sample_rate, speaker);
    const LefFile file = LefFile::from_bytes(bytes, label);
    return NeuralModel::load(file, label, std::move(backend));
}

std::shared_ptr<NeuralModel> share_vits_decoder(std::shared_ptr<const NeuralModel> base,
                                                const VitsWeights& weights, int speaker) {
    return NeuralModel::sharing_weights(std::move(base), vits_decoder_input_bias(weights, speaker));
}

}  // namespace etude::engine
