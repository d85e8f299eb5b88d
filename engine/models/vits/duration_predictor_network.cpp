#include "engine/models/vits/duration_predictor_network.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine/error.h"
#include "engine/models/device_weights.h"

namespace etude::engine {

// One DDSConv stack: per layer the depthwise convolution, the 1x1
// convolution and the two layer norms.
struct VitsDurationNetwork::Dds {
    struct Layer {
        gpu::DeviceBuffer sep_w, sep_b, pointwise_w, pointwise_b;
        gpu::DeviceBuffer norm1_g, norm1_b, norm2_g, norm2_b;
        int dilation = 1;
    };
    std::vector<Layer> layers;
};

// One ConvFlow: the input convolution of the first noise channel, its
// DDSConv (dds_[1 + index]) and the projection to the spline's parameters.
struct VitsDurationNetwork::Flow {
    gpu::DeviceBuffer pre_w, pre_b, proj_w, proj_b;
};

// A call's working buffers, time-major [phonemes][channels] unless named
// channel-major.
struct VitsDurationNetwork::Work {
    int n = 0;               // rows: the sentences end to end, with their gaps
    gpu::DeviceBuffer mask;  // [n]: 1 on a sentence's rows, 0 on a gap (empty alone)
    gpu::DeviceBuffer enc, x, h, y, t, cm, cm_out, params, z0, z1;
};

namespace {

const VitsTensor& tensor(const VitsWeights& w, const std::string& role) {
    const VitsTensor* t = w.find(role);
    if (!t || t->released || t->values.empty())
        throw Error("VITS duration predictor on a device: the weight " + role + " is not held");
    return *t;
}

}  // namespace

VitsDurationNetwork::~VitsDurationNetwork() = default;

VitsDurationNetwork::VitsDurationNetwork(const VitsWeights& w,
                                         std::shared_ptr<gpu::Backend> backend)
    : backend_(std::move(backend)), hp_(w.hp) {
    if (!backend_) throw Error("VITS duration predictor: no backend");
    if (hp_.dp_kernel % 2 == 0)
        throw Error("VITS duration predictor: depthwise kernel " + std::to_string(hp_.dp_kernel) +
                    " is even; only odd kernels (Piper's 3) run on a device");
    auto& b = *backend_;
    auto queue = b.create_queue();
    const auto upload = [&](const std::string& role) {
        const std::vector<float>& v = tensor(w, role).values;
        gpu::DeviceBuffer d = b.allocate(v.size(), kWeightsTag);
        b.copy_to_device(*queue, d, 0, v.data(), v.size());
        return d;
    };
    const int h = hp_.hidden_channels;
    const auto dds = [&](const std::string& r) {
        Dds d;
        for (int i = 0, dilation = 1; i < 3; ++i, dilation *= hp_.dp_kernel) {
            const std::string n = std::to_string(i);
            Dds::Layer L;
            L.sep_w = upload(r + ".convs_sep." + n + ".weight");
            L.sep_b = upload(r + ".convs_sep." + n + ".bias");
            L.pointwise_w = upload(r + ".convs_1x1." + n + ".weight");
            L.pointwise_b = upload(r + ".convs_1x1." + n + ".bias");
            L.norm1_g = upload(r + ".norms_1." + n + ".gamma");
            L.norm1_b = upload(r + ".norms_1." + n + ".beta");
            L.norm2_g = upload(r + ".norms_2." + n + ".gamma");
            L.norm2_b = upload(r + ".norms_2." + n + ".beta");
            L.dilation = dilation;
            d.layers.push_back(std::move(L));
        }
        return d;
    };
    // The input convolution's bias per speaker: + dp.cond(g), in double
    // as the host adds it, rounded once.
    const auto& pre_b = tensor(w, "dp.pre.bias").values;
    if (hp_.num_speakers > 1) {
        const auto& emb = tensor(w, "emb_g.weight").values;
        const auto& cw = tensor(w, "dp.cond.weight").values;
        const auto& cb = tensor(w, "dp.cond.bias").values;
        const int gin = hp_.gin_channels;
        for (int s = 0; s < hp_.num_speakers; ++s) {
            std::vector<float> bias(std::size_t(h), 0.0f);
            for (int c = 0; c < h; ++c) {
                double acc = cb[std::size_t(c)];
                for (int i = 0; i < gin; ++i)
                    acc += double(cw[std::size_t(c) * gin + i]) * emb[std::size_t(s) * gin + i];
                bias[std::size_t(c)] = static_cast<float>(double(pre_b[std::size_t(c)]) + acc);
            }
            pre_bias_.push_back(std::move(bias));
        }
    } else {
        pre_bias_.push_back(pre_b);
    }
    pre_w_ = upload("dp.pre.weight");
    dds_.push_back(dds("dp.convs"));
    proj_w_ = upload("dp.proj.weight");
    proj_b_ = upload("dp.proj.bias");
    for (int f = 0; f < hp_.dp_flows; ++f) {
        const std::string r = "dp.flows." + std::to_string(7 - 2 * f);
        Flow F;
        F.pre_w = upload(r + ".pre.weight");
        F.pre_b = upload(r + ".pre.bias");
        dds_.push_back(dds(r + ".convs"));
        F.proj_w = upload(r + ".proj.weight");
        F.proj_b = upload(r + ".proj.bias");
        if (F.proj_b.floats() != std::size_t(3 * hp_.spline_bins - 1))
            throw Error("VITS duration predictor: " + r + ".proj makes " +
                        std::to_string(F.proj_b.floats()) + " spline parameters, " +
                        std::to_string(3 * hp_.spline_bins - 1) + " expected for " +
                        std::to_string(hp_.spline_bins) + " bins");
        flows_.push_back(std::move(F));
    }
    affine_m_ = tensor(w, "dp.flows.0.m").values[0];
    affine_scale_ = tensor(w, "dp.flows.0.exp_neg_logs").values[0];
    b.synchronize(*queue);
}

// One DDSConv stack over x ([n][hidden]), in place. The depthwise
// convolution reads zeros beyond each sentence's ends, as the host's does:
// the padding at the batch's ends, the masked gaps between sentences.
void VitsDurationNetwork::run_dds(gpu::Queue& q, const Dds& d, Work& w,
                                  gpu::DeviceBuffer& x) const {
    auto& b = *backend_;
    const int n = w.n, h = hp_.hidden_channels, k = hp_.dp_kernel;
    const std::size_t nh = std::size_t(n) * h;
    for (const Dds::Layer& L : d.layers) {
        gpu::Conv1dShape sep;
        sep.in_channels = h;
        sep.out_channels = h;
        sep.groups = h;
        sep.in_length = n;
        sep.kernel = k;
        sep.dilation = L.dilation;
        sep.padding = (k * L.dilation - L.dilation) / 2;
        if (w.mask) b.broadcast_multiply(q, n, h, w.mask, true, x);
        b.transpose(q, n, h, x, w.cm);
        b.conv1d(q, sep, w.cm, L.sep_w, L.sep_b, w.cm_out);
        b.transpose(q, h, n, w.cm_out, w.y);
        b.layer_norm(q, n, h, 1e-5f, w.y, L.norm1_g, L.norm1_b, w.t);
        b.activation(q, gpu::Activation::Gelu, w.t, w.t, nh);
        b.gemm(q, false, true, n, h, h, 1.0f, w.t, h, L.pointwise_w, h, 0.0f, w.y, h);
        b.add_bias(q, n, h, L.pointwise_b, false, w.y);
        b.layer_norm(q, n, h, 1e-5f, w.y, L.norm2_g, L.norm2_b, w.t);
        b.activation(q, gpu::Activation::Gelu, w.t, w.t, nh);
        b.axpby(q, nh, 1.0f, w.t, 1.0f, x);
    }
}

std::vector<double> VitsDurationNetwork::log_durations(const VitsEncoding& e,
                                                       std::span<const double> noise,
                                                       int speaker) const {
    const Sentence one[] = {{&e, noise, speaker}};
    return std::move(log_durations(std::span<const Sentence>(one)).front());
}

std::vector<std::vector<double>> VitsDurationNetwork::log_durations(
    std::span<const Sentence> sentences) const {
    const int h = hp_.hidden_channels, bins = hp_.spline_bins;
    for (const Sentence& s : sentences) {
        if (!s.encoding) throw Error("VITS duration predictor: a sentence without its encoding");
        const int n = s.encoding->phonemes;
        if (n <= 0 || s.encoding->hidden.size() != std::size_t(h) * std::size_t(n))
            throw Error("VITS duration predictor: an encoding of " + std::to_string(n) +
                        " phonemes needs " + std::to_string(h) +
                        " hidden channels per phoneme; it has " +
                        std::to_string(s.encoding->hidden.size()) + " values");
        if (s.noise.size() != 2 * std::size_t(n))
            throw Error("VITS duration predictor: the noise for " + std::to_string(n) +
                        " phonemes is 2 x " + std::to_string(n) + " values; it has " +
                        std::to_string(s.noise.size()));
        if (hp_.num_speakers > 1 && (s.speaker < 0 || s.speaker >= hp_.num_speakers))
            throw Error("VITS: speaker " + std::to_string(s.speaker) + " is outside the voice's " +
                        std::to_string(hp_.num_speakers) + " speakers");
    }
    if (sentences.empty()) return {};
    // The sentences end to end, time-major, each followed by the widest
    // depthwise padding's zeros (masked before each depthwise convolution,
    // as Piper masks there), so none reads another's phonemes.
    const int gap =
        sentences.size() > 1 ? (hp_.dp_kernel - 1) / 2 * hp_.dp_kernel * hp_.dp_kernel : 0;
    std::vector<int> first_row;
    int rows = 0;
    for (const Sentence& s : sentences) {
        first_row.push_back(rows);
        rows += s.encoding->phonemes + gap;
    }
    rows -= gap;
    const std::size_t nh = std::size_t(rows) * h;
    std::vector<float> enc(nh, 0.0f), bias(nh, 0.0f), mask, z0(std::size_t(rows), 0.0f),
        z1(std::size_t(rows), 0.0f);
    if (gap > 0) mask.assign(std::size_t(rows), 0.0f);
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        const Sentence& s = sentences[i];
        const int n = s.encoding->phonemes;
        const std::vector<float>& pre_bias =
            pre_bias_[hp_.num_speakers > 1 ? std::size_t(s.speaker) : 0];
        for (int t = 0; t < n; ++t) {
            const std::size_t row = std::size_t(first_row[i] + t);
            for (int c = 0; c < h; ++c) {
                enc[row * h + c] = s.encoding->hidden[std::size_t(c) * n + t];
                bias[row * h + c] = pre_bias[std::size_t(c)];
            }
            z0[row] = static_cast<float>(s.noise[std::size_t(t)]);
            z1[row] = static_cast<float>(s.noise[std::size_t(n + t)]);
            if (gap > 0) mask[row] = 1.0f;
        }
    }

    auto& b = *backend_;
    auto queue = b.create_queue();
    auto& q = *queue;
    const auto buffer = [&](std::size_t floats) { return b.allocate(floats, kWorkTag); };
    Work w;
    w.n = rows;
    w.enc = buffer(nh);
    w.x = buffer(nh);
    w.h = buffer(nh);
    w.y = buffer(nh);
    w.t = buffer(nh);
    w.cm = buffer(nh);
    w.cm_out = buffer(nh);
    w.params = buffer(std::size_t(rows) * (3 * bins - 1));
    w.z0 = buffer(std::size_t(rows));
    w.z1 = buffer(std::size_t(rows));
    if (gap > 0) {
        w.mask = buffer(std::size_t(rows));
        b.copy_to_device(q, w.mask, 0, mask.data(), mask.size());
    }
    b.copy_to_device(q, w.enc, 0, enc.data(), nh);
    b.copy_to_device(q, w.y, 0, bias.data(), nh);
    b.copy_to_device(q, w.z0, 0, z0.data(), z0.size());
    b.copy_to_device(q, w.z1, 0, z1.data(), z1.size());
    // x = proj(dds(pre(enc) + bias + cond(g))): the bias rows, each
    // sentence's speaker's, are added as a matrix.
    b.gemm(q, false, true, rows, h, h, 1.0f, w.enc, h, pre_w_, h, 0.0f, w.h, h);
    b.axpby(q, nh, 1.0f, w.y, 1.0f, w.h);
    run_dds(q, dds_[0], w, w.h);
    b.gemm(q, false, true, rows, h, h, 1.0f, w.h, h, proj_w_, h, 0.0f, w.x, h);
    b.add_bias(q, rows, h, proj_b_, false, w.x);
    // The flows inverted: Flip, then ConvFlow's spline inverse on the second
    // channel, its parameters from the first channel and x.
    gpu::DeviceBuffer* first = &w.z0;
    gpu::DeviceBuffer* second = &w.z1;
    const int width = 3 * bins - 1;
    const float scale = static_cast<float>(1.0 / std::sqrt(double(h)));
    for (std::size_t f = 0; f < flows_.size(); ++f) {
        std::swap(first, second);  // Flip
        const Flow& F = flows_[f];
        b.gemm(q, false, true, rows, h, 1, 1.0f, *first, 1, F.pre_w, 1, 0.0f, w.h, h);
        b.add_bias(q, rows, h, F.pre_b, false, w.h);
        b.axpby(q, nh, 1.0f, w.x, 1.0f, w.h);
        run_dds(q, dds_[1 + f], w, w.h);
        b.gemm(q, false, true, rows, width, h, 1.0f, w.h, h, F.proj_w, h, 0.0f, w.params, width);
        b.add_bias(q, rows, width, F.proj_b, false, w.params);
        b.spline_inverse(q, rows, bins, 5.0f, scale, w.params, *second, *second);
    }
    std::swap(first, second);  // the last Flip
    b.copy_to_host(q, z0.data(), *first, 0, z0.size());
    b.synchronize(q);
    // The elementwise affine flow's inverse, in double.
    std::vector<std::vector<double>> out;
    for (std::size_t i = 0; i < sentences.size(); ++i) {
        const int n = sentences[i].encoding->phonemes;
        std::vector<double> logw(static_cast<std::size_t>(n));
        for (int t = 0; t < n; ++t)
            logw[std::size_t(t)] =
                (double(z0[std::size_t(first_row[i] + t)]) - affine_m_) * affine_scale_;
        out.push_back(std::move(logw));
    }
    return out;
}

}  // namespace etude::engine
