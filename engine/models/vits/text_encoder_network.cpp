#include "engine/models/vits/text_encoder_network.h"

#include <algorithm>
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

// A call's working buffers, [batch * length][...] unless named
// channel-major; `mask` [batch * length] is 1 on a sentence's positions
// and 0 on its padding (empty when nothing is padded).
struct VitsTextEncoderNetwork::Work {
    int batch = 1, length = 0;
    gpu::DeviceBuffer mask;
    gpu::DeviceBuffer x, y, q, k, v, att, scores, stats;
    gpu::DeviceBuffer x_cm, h_cm, y_cm;  // the feed-forward block, channel-major
};

namespace {

const VitsTensor& tensor(const VitsWeights& w, const std::string& role) {
    const VitsTensor* t = w.find(role);
    if (!t || t->released || t->values.empty())
        throw Error("VITS text encoder on a device: the weight " + role +
                    " is not held (made before the voice released it?)");
    return *t;
}

// Before the members that use it (the work pool) are made.
std::shared_ptr<gpu::Backend> checked(std::shared_ptr<gpu::Backend> backend) {
    if (!backend) throw Error("VITS text encoder: no backend");
    return backend;
}

}  // namespace

VitsTextEncoderNetwork::~VitsTextEncoderNetwork() = default;

VitsTextEncoderNetwork::VitsTextEncoderNetwork(const VitsWeights& w,
                                               std::shared_ptr<gpu::Backend> backend)
    : backend_(checked(std::move(backend))), hp_(w.hp) {
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

// Every layer over a batch's x ([batch * length][hidden], the scaled
// embedding on entry, zero on the padding; the encoder's output on return).
// The feed-forward convolutions run over the sentences laid end to end
// (channel-major, [hidden][batch * length]): each sentence is followed by
// at least the kernel's reach of padding, zeroed by the mask before each
// convolution, so none reads another's positions (Piper masks there too).
void VitsTextEncoderNetwork::run_layers(gpu::Queue& q, Work& w) const {
    auto& b = *backend_;
    const int rows = w.batch * w.length, n = w.length;
    const int h = hp_.hidden_channels, heads = hp_.n_heads, kc = h / heads;
    const int filter = hp_.filter_channels, k = hp_.ffn_kernel;
    const std::size_t nh = std::size_t(rows) * h;
    const float scale = static_cast<float>(1.0 / std::sqrt(double(kc)));
    // y[rows][out] = x W^T + bias: a 1x1 convolution, time-major.
    const auto dense = [&](const gpu::DeviceBuffer& x, const gpu::DeviceBuffer& wt,
                           const gpu::DeviceBuffer& bias, int out, gpu::DeviceBuffer& y) {
        b.gemm(q, false, true, rows, out, h, 1.0f, x, h, wt, h, 0.0f, y, out);
        b.add_bias(q, rows, out, bias, false, y);
    };
    gpu::Conv1dShape ffn1;
    ffn1.in_channels = h;
    ffn1.out_channels = filter;
    ffn1.in_length = rows;
    ffn1.kernel = k;
    ffn1.padding = (k - 1) / 2;
    gpu::Conv1dShape ffn2 = ffn1;
    ffn2.in_channels = filter;
    ffn2.out_channels = h;
    for (const Layer& L : layers_) {
        dense(w.x, L.wq, L.bq, h, w.q);
        dense(w.x, L.wk, L.bk, h, w.k);
        dense(w.x, L.wv, L.bv, h, w.v);
        b.relative_attention_scores(q, w.batch, heads, n, kc, hp_.window, scale, w.q, w.k, L.rel_k,
                                    w.mask, w.scores);
        b.softmax_rows(q, w.batch * heads * n, n, w.scores, w.scores);
        b.relative_attention_values(q, w.batch, heads, n, kc, hp_.window, w.scores, w.v, L.rel_v,
                                    w.att);
        dense(w.att, L.wo, L.bo, h, w.y);
        b.axpby(q, nh, 1.0f, w.x, 1.0f, w.y);
        b.layer_norm(q, rows, h, 1e-5f, w.y, L.norm1_g, L.norm1_b, w.x);
        // conv_2(relu(conv_1(x))), "same" padding.
        if (w.mask) b.broadcast_multiply(q, rows, h, w.mask, true, w.x);
        b.transpose(q, rows, h, w.x, w.x_cm);
        b.conv1d(q, ffn1, w.x_cm, L.ffn1_w, L.ffn1_b, w.h_cm);
        b.activation(q, gpu::Activation::LeakyRelu, w.h_cm, w.h_cm, std::size_t(filter) * rows,
                     0.0f);
        if (w.mask) b.broadcast_multiply(q, filter, rows, w.mask, false, w.h_cm);
        b.conv1d(q, ffn2, w.h_cm, L.ffn2_w, L.ffn2_b, w.y_cm);
        b.transpose(q, h, rows, w.y_cm, w.y);
        b.axpby(q, nh, 1.0f, w.x, 1.0f, w.y);
        b.layer_norm(q, rows, h, 1e-5f, w.y, L.norm2_g, L.norm2_b, w.x);
    }
}

VitsEncoding VitsTextEncoderNetwork::encode(std::span<const std::int64_t> ids) const {
    const std::span<const std::int64_t> one[] = {ids};
    return std::move(encode(std::span<const std::span<const std::int64_t>>(one)).front());
}

std::vector<VitsEncoding> VitsTextEncoderNetwork::encode(
    std::span<const std::span<const std::int64_t>> sentences) const {
    for (const auto& ids : sentences) check_phoneme_ids(hp_, ids);
    if (sentences.empty()) return {};
    const int h = hp_.hidden_channels, stats_ch = 2 * hp_.inter_channels;
    Work w;
    w.batch = int(sentences.size());
    std::size_t longest = 0;
    for (const auto& ids : sentences) longest = std::max(longest, ids.size());
    // Alone, a sentence needs no padding; in a batch each is followed by at
    // least the feed-forward kernel's reach of it.
    w.length = int(longest) + (w.batch > 1 ? (hp_.ffn_kernel - 1) / 2 : 0);
    const std::size_t rows = std::size_t(w.batch) * w.length, nh = rows * h;
    std::vector<float> x0(nh, 0.0f), mask(rows, 0.0f);
    for (int s = 0; s < w.batch; ++s) {
        const auto& ids = sentences[std::size_t(s)];
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const std::size_t row = std::size_t(s) * w.length + i;
            std::copy_n(embedding_.begin() + std::ptrdiff_t(ids[i]) * h, h,
                        x0.begin() + std::ptrdiff_t(row) * h);
            mask[row] = 1.0f;
        }
    }
    auto& b = *backend_;
    auto queue = b.create_queue();
    auto& q = *queue;
    const auto buffer = [&](std::size_t floats) { return work_pool_.allocate(floats, kWorkTag); };
    if (rows > longest) {
        w.mask = buffer(rows);
        b.copy_to_device(q, w.mask, 0, mask.data(), rows);
    }
    w.x = buffer(nh);
    w.y = buffer(nh);
    w.q = buffer(nh);
    w.k = buffer(nh);
    w.v = buffer(nh);
    w.att = buffer(nh);
    w.scores = buffer(std::size_t(w.batch) * hp_.n_heads * w.length * w.length);
    w.x_cm = buffer(nh);
    w.h_cm = buffer(rows * hp_.filter_channels);
    w.y_cm = buffer(nh);
    w.stats = buffer(rows * stats_ch);
    b.copy_to_device(q, w.x, 0, x0.data(), nh);
    run_layers(q, w);
    b.gemm(q, false, true, int(rows), stats_ch, h, 1.0f, w.x, h, proj_w_, h, 0.0f, w.stats,
           stats_ch);
    b.add_bias(q, int(rows), stats_ch, proj_b_, false, w.stats);
    std::vector<float> hidden(nh), stats(rows * stats_ch);
    b.copy_to_host(q, hidden.data(), w.x, 0, nh);
    b.copy_to_host(q, stats.data(), w.stats, 0, stats.size());
    b.synchronize(q);
    // Each sentence's rows, channel-major.
    std::vector<VitsEncoding> out(sentences.size());
    for (int s = 0; s < w.batch; ++s) {
        VitsEncoding& e = out[std::size_t(s)];
        const int n = int(sentences[std::size_t(s)].size());
        e.phonemes = n;
        e.hidden.resize(std::size_t(h) * n);
        e.stats.resize(std::size_t(stats_ch) * n);
        for (int i = 0; i < n; ++i) {
            const std::size_t row = std::size_t(s) * w.length + i;
            for (int c = 0; c < h; ++c) e.hidden[std::size_t(c) * n + i] = hidden[row * h + c];
            for (int c = 0; c < stats_ch; ++c)
                e.stats[std::size_t(c) * n + i] = stats[row * stats_ch + c];
        }
    }
    return out;
}

}  // namespace etude::engine
