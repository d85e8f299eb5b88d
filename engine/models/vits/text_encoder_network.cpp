#include "engine/models/vits/text_encoder_network.h"

#include <cmath>
#include <string>
#include <utility>

#include "engine/error.h"
#include "engine/models/device_weights.h"

namespace etude::engine {

struct VitsTextEncoderNetwork::Layer {
    gpu::DeviceBuffer wq, bq, wk, bk, wv, bv, wo, bo;  // [hidden][hidden], [hidden]
    gpu::DeviceBuffer rel_k, rel_v;                    // [2*window + 1][hidden / heads]
    gpu::DeviceBuffer norm1_g, norm1_b, norm2_g, norm2_b;
    gpu::DeviceBuffer ffn1_w, ffn1_b, ffn2_w, ffn2_b;  // conv1d weights and biases
};

// One sentence's working buffers, [phonemes][...] unless named channel-major.
struct VitsTextEncoderNetwork::Work {
    gpu::DeviceBuffer x, y, q, k, v, att, scores;
    gpu::DeviceBuffer x_cm, h_cm, y_cm;  // the feed-forward block, channel-major
    gpu::DeviceBuffer stats, stats_cm, hidden_cm;
};

namespace {

const VitsTensor& tensor(const VitsWeights& w, const std::string& role) {
    const VitsTensor* t = w.find(role);
    if (!t || t->released || t->values.empty())
        throw Error("VITS text encoder on a device: the weight " + role +
                    " is not held (made before the voice released it?)");
    return *t;
}

}  // namespace

VitsTextEncoderNetwork::~VitsTextEncoderNetwork() = default;

VitsTextEncoderNetwork::VitsTextEncoderNetwork(const VitsWeights& w,
                                               std::shared_ptr<gpu::Backend> backend)
    : backend_(std::move(backend)), hp_(w.hp) {
    if (!backend_) throw Error("VITS text encoder: no backend");
    if (hp_.ffn_kernel % 2 == 0)
        throw Error("VITS text encoder: feed-forward kernel " + std::to_string(hp_.ffn_kernel) +
                    " is even; only odd kernels (Piper's 3) run on a device");
    if (hp_.n_heads <= 0 || hp_.hidden_channels % hp_.n_heads != 0)
        throw Error("VITS text encoder: " + std::to_string(hp_.n_heads) + " heads for " +
                    std::to_string(hp_.hidden_channels) + " channels");
    auto& b = *backend_;
    auto queue = b.create_queue();
    const auto upload = [&](const std::string& role) {
        const std::vector<float>& v = tensor(w, role).values;
        gpu::DeviceBuffer d = b.allocate(v.size(), kWeightsTag);
        b.copy_to_device(*queue, d, 0, v.data(), v.size());
        return d;
    };
    const auto& emb = tensor(w, "enc_p.emb.weight").values;
    const float scale = static_cast<float>(std::sqrt(double(hp_.hidden_channels)));
    embedding_.resize(emb.size());
    for (std::size_t i = 0; i < emb.size(); ++i)
        embedding_[i] = static_cast<float>(double(emb[i]) * scale);
    for (int l = 0; l < hp_.n_layers; ++l) {
        const std::string n = std::to_string(l);
        const std::string a = "enc_p.encoder.attn_layers." + n;
        const std::string f = "enc_p.encoder.ffn_layers." + n;
        Layer L;
        L.wq = upload(a + ".conv_q.weight");
        L.bq = upload(a + ".conv_q.bias");
        L.wk = upload(a + ".conv_k.weight");
        L.bk = upload(a + ".conv_k.bias");
        L.wv = upload(a + ".conv_v.weight");
        L.bv = upload(a + ".conv_v.bias");
        L.wo = upload(a + ".conv_o.weight");
        L.bo = upload(a + ".conv_o.bias");
        L.rel_k = upload(a + ".emb_rel_k");
        L.rel_v = upload(a + ".emb_rel_v");
        L.norm1_g = upload("enc_p.encoder.norm_layers_1." + n + ".gamma");
        L.norm1_b = upload("enc_p.encoder.norm_layers_1." + n + ".beta");
        L.ffn1_w = upload(f + ".conv_1.weight");
        L.ffn1_b = upload(f + ".conv_1.bias");
        L.ffn2_w = upload(f + ".conv_2.weight");
        L.ffn2_b = upload(f + ".conv_2.bias");
        L.norm2_g = upload("enc_p.encoder.norm_layers_2." + n + ".gamma");
        L.norm2_b = upload("enc_p.encoder.norm_layers_2." + n + ".beta");
        layers_.push_back(std::move(L));
    }
    proj_w_ = upload("enc_p.proj.weight");
    proj_b_ = upload("enc_p.proj.bias");
    b.synchronize(*queue);
}

// Every layer over one sentence's x ([phonemes][hidden], the scaled
// embedding on entry, the encoder's output on return).
void VitsTextEncoderNetwork::run_layers(gpu::Queue& q, Work& w, int n) const {
    auto& b = *backend_;
    const int h = hp_.hidden_channels, heads = hp_.n_heads, kc = h / heads;
    const int filter = hp_.filter_channels, k = hp_.ffn_kernel;
    const std::size_t nh = std::size_t(n) * h;
    const float scale = static_cast<float>(1.0 / std::sqrt(double(kc)));
    // y[n][h] = x W^T + bias: a 1x1 convolution, time-major.
    const auto dense = [&](const gpu::DeviceBuffer& x, const gpu::DeviceBuffer& wt,
                           const gpu::DeviceBuffer& bias, int out, gpu::DeviceBuffer& y) {
        b.gemm(q, false, true, n, out, h, 1.0f, x, h, wt, h, 0.0f, y, out);
        b.add_bias(q, n, out, bias, false, y);
    };
    gpu::Conv1dShape ffn1;
    ffn1.in_channels = h;
    ffn1.out_channels = filter;
    ffn1.in_length = n;
    ffn1.kernel = k;
    ffn1.padding = (k - 1) / 2;
    gpu::Conv1dShape ffn2 = ffn1;
    ffn2.in_channels = filter;
    ffn2.out_channels = h;
    for (const Layer& L : layers_) {
        dense(w.x, L.wq, L.bq, h, w.q);
        dense(w.x, L.wk, L.bk, h, w.k);
        dense(w.x, L.wv, L.bv, h, w.v);
        b.relative_attention_scores(q, heads, n, kc, hp_.window, scale, w.q, w.k, L.rel_k,
                                    w.scores);
        b.softmax_rows(q, heads * n, n, w.scores, w.scores);
        b.relative_attention_values(q, heads, n, kc, hp_.window, w.scores, w.v, L.rel_v, w.att);
        dense(w.att, L.wo, L.bo, h, w.y);
        b.axpby(q, nh, 1.0f, w.x, 1.0f, w.y);
        b.layer_norm(q, n, h, 1e-5f, w.y, L.norm1_g, L.norm1_b, w.x);
        // conv_2(relu(conv_1(x))), "same" padding; one sentence, so every
        // mask of Piper's is all ones.
        b.transpose(q, n, h, w.x, w.x_cm);
        b.conv1d(q, ffn1, w.x_cm, L.ffn1_w, L.ffn1_b, w.h_cm);
        b.activation(q, gpu::Activation::LeakyRelu, w.h_cm, w.h_cm, std::size_t(filter) * n, 0.0f);
        b.conv1d(q, ffn2, w.h_cm, L.ffn2_w, L.ffn2_b, w.y_cm);
        b.transpose(q, h, n, w.y_cm, w.y);
        b.axpby(q, nh, 1.0f, w.x, 1.0f, w.y);
        b.layer_norm(q, n, h, 1e-5f, w.y, L.norm2_g, L.norm2_b, w.x);
    }
}

VitsEncoding VitsTextEncoderNetwork::encode(std::span<const std::int64_t> ids) const {
    const std::span<const std::int64_t> one[] = {ids};
    return std::move(encode(std::span<const std::span<const std::int64_t>>(one)).front());
}

std::vector<VitsEncoding> VitsTextEncoderNetwork::encode(
    std::span<const std::span<const std::int64_t>> sentences) const {
    const int h = hp_.hidden_channels, stats_ch = 2 * hp_.inter_channels;
    for (const auto& ids : sentences) check_phoneme_ids(hp_, ids);
    auto& b = *backend_;
    auto queue = b.create_queue();
    auto& q = *queue;
    std::vector<VitsEncoding> out(sentences.size());
    std::vector<std::vector<float>> inputs(sentences.size());
    // Each sentence's working buffers stay allocated until the queue is
    // synchronised once, after the last: nothing waits between sentences.
    std::vector<Work> works(sentences.size());
    for (std::size_t s = 0; s < sentences.size(); ++s) {
        const auto& ids = sentences[s];
        const int n = int(ids.size());
        const std::size_t nh = std::size_t(n) * h;
        auto& x0 = inputs[s];
        x0.resize(nh);
        for (int i = 0; i < n; ++i)
            std::copy_n(embedding_.begin() + std::ptrdiff_t(ids[std::size_t(i)]) * h, h,
                        x0.begin() + std::ptrdiff_t(i) * h);
        Work& w = works[s];
        const auto buffer = [&](std::size_t floats) { return b.allocate(floats, kWorkTag); };
        w.x = buffer(nh);
        w.y = buffer(nh);
        w.q = buffer(nh);
        w.k = buffer(nh);
        w.v = buffer(nh);
        w.att = buffer(nh);
        w.scores = buffer(std::size_t(hp_.n_heads) * n * n);
        w.x_cm = buffer(nh);
        w.h_cm = buffer(std::size_t(hp_.filter_channels) * n);
        w.y_cm = buffer(nh);
        w.stats = buffer(std::size_t(stats_ch) * n);
        w.stats_cm = buffer(std::size_t(stats_ch) * n);
        w.hidden_cm = buffer(nh);
        b.copy_to_device(q, w.x, 0, x0.data(), nh);
        run_layers(q, w, n);
        b.gemm(q, false, true, n, stats_ch, h, 1.0f, w.x, h, proj_w_, h, 0.0f, w.stats, stats_ch);
        b.add_bias(q, n, stats_ch, proj_b_, false, w.stats);
        b.transpose(q, n, stats_ch, w.stats, w.stats_cm);
        b.transpose(q, n, h, w.x, w.hidden_cm);
        VitsEncoding& e = out[s];
        e.phonemes = n;
        e.hidden.resize(nh);
        e.stats.resize(std::size_t(stats_ch) * n);
        b.copy_to_host(q, e.hidden.data(), w.hidden_cm, 0, nh);
        b.copy_to_host(q, e.stats.data(), w.stats_cm, 0, e.stats.size());
    }
    b.synchronize(q);
    return out;
}

}  // namespace etude::engine
