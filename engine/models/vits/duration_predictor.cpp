// The stochastic duration predictor of VITS' text-to-latent network on the
// host, in reverse: DDSConv blocks, the rational-quadratic spline flows
// inverted, and each phoneme's log duration; also the predictor's reach,
// which staged priors (text_to_latent.cpp) rely on.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/vits/text_to_latent_network.h"
#include "gpu/host_compute.h"

namespace etude::engine::vits_host {

// DDSConv: each layer is a depthwise dilated convolution, layer norm,
// GELU, a 1x1 convolution, layer norm and GELU, added to its input.
// One time slice per worker from start to end: the slice reads its
// input with the depthwise kernel's reach each side and writes only its
// own columns of the layer's output, which is added once all are made.
void TextToLatentNetwork::dds(Signal& x, const std::string& r) const {
    const int k = hp_.dp_kernel;
    int dilation = 1;
    for (int i = 0; i < 3; ++i, dilation *= k) {
        const std::string n = std::to_string(i);
        const Conv sep = conv(r + ".convs_sep." + n), pointwise = conv(r + ".convs_1x1." + n);
        const VitsTensor &g1 = t(r + ".norms_1." + n + ".gamma"),
                         &b1 = t(r + ".norms_1." + n + ".beta"),
                         &g2 = t(r + ".norms_2." + n + ".gamma"),
                         &b2 = t(r + ".norms_2." + n + ".beta");
        const int pad = (k * dilation - dilation) / 2, channels = x.c;
        Signal y(channels, x.t);
        const std::size_t macs = std::size_t(channels) * (channels + k) * x.t;
        over_time_slices(x.t, macs, [&](int t0, int len) {
            // y[c][t] = b[c] + sum_kk w[c][0][kk] x[c][t + kk*dilation - pad]
            for (int c = 0; c < channels; ++c) {
                double* yr = y.row(c) + t0;
                const double* xr = x.row(c);
                std::fill(yr, yr + len, bias_of(sep, c));
                for (int kk = 0; kk < k; ++kk) {
                    const double w = sep.w->values[std::size_t(c) * k + kk];
                    const int shift = kk * dilation - pad + t0;  // column j reads j + shift
                    const int j0 = std::clamp(-shift, 0, len);
                    const int j1 = std::clamp(x.t - shift, j0, len);
                    for (int j = j0; j < j1; ++j) yr[j] += w * xr[j + shift];
                }
            }
            const auto gelu_columns = [&] {
                for (int c = 0; c < channels; ++c)
                    gpu::host::gelu(y.row(c) + t0, y.row(c) + t0, std::size_t(len));
            };
            layer_norm_columns(y, t0, len, g1, b1);
            gelu_columns();
            const auto columns = float_scratch(std::size_t(channels) * len);
            const auto product = float_scratch(std::size_t(channels) * len);
            gather_columns(y.v.data(), std::size_t(y.t), 0, y.t, channels, 1, 1, 0, t0, len,
                           columns.get());
            slice_product(pointwise, channels, columns.get(), len, product.get());
            write_slice(pointwise, product.get(), len, y, t0);
            layer_norm_columns(y, t0, len, g2, b2);
            gelu_columns();
        });
        add(x, y);
    }
}

// Phonemes either side one phoneme's duration depends on: each DDSConv
// (3 layers of kernel k, dilations 1, k, k^2) reaches (k - 1) / 2 * (1
// + k + k^2) each side, and there is one before the flows and one in
// each flow.
int TextToLatentNetwork::duration_reach() const {
    const int k = hp_.dp_kernel;
    return (k - 1) / 2 * (1 + k + k * k) * (1 + hp_.dp_flows);
}

// Inverse of the rational-quadratic spline on [-bound, bound] (identity
// outside), as piper_train/vits/transforms.py computes it.
double TextToLatentNetwork::inverse_spline(double x, const double* uw, const double* uh,
                                           const double* ud, int bins) {
    const double bound = 5.0, min_bin = 1e-3, min_d = 1e-3;
    if (x < -bound || x > bound) return x;
    auto knots = [&](const double* raw, std::vector<double>& cum) {
        double top = -INFINITY, sum = 0;
        for (int i = 0; i < bins; ++i) top = std::max(top, raw[i]);
        std::vector<double> e(static_cast<std::size_t>(bins));
        for (int i = 0; i < bins; ++i) sum += (e[std::size_t(i)] = std::exp(raw[i] - top));
        cum.assign(std::size_t(bins) + 1, 0.0);
        double acc = 0;
        for (int i = 0; i < bins; ++i) {
            acc += min_bin + (1 - min_bin * bins) * (e[std::size_t(i)] / sum);
            cum[std::size_t(i) + 1] = 2 * bound * acc - bound;
        }
        cum[0] = -bound;
        cum[std::size_t(bins)] = bound;
    };
    std::vector<double> cw, ch;
    knots(uw, cw);
    knots(uh, ch);
    auto derivative = [&](int i) {  // knots 0..bins; the ends have derivative 1
        if (i == 0 || i == bins) return 1.0;
        return min_d + softplus(ud[i - 1]);
    };
    int k = -1;
    for (int i = 0; i <= bins; ++i)
        k += x >= (i == bins ? ch[std::size_t(i)] + 1e-6 : ch[std::size_t(i)]);
    k = std::clamp(k, 0, bins - 1);
    const double w = cw[std::size_t(k) + 1] - cw[std::size_t(k)];
    const double h = ch[std::size_t(k) + 1] - ch[std::size_t(k)];
    const double slope = h / w, d0 = derivative(k), d1 = derivative(k + 1);
    const double dy = x - ch[std::size_t(k)];
    const double curve = d0 + d1 - 2 * slope;
    const double a = dy * curve + h * (slope - d0);
    const double b = h * d0 - dy * curve;
    const double c = -slope * dy;
    const double theta = (2 * c) / (-b - std::sqrt(b * b - 4 * a * c));
    return theta * w + cw[std::size_t(k)];
}

// The duration predictor's noise for `length` phonemes, [2][length], in
// the order Piper's torch.randn fills it.
Signal TextToLatentNetwork::duration_noise(int length, double noise_w, std::mt19937_64& rng) {
    Signal z(2, length);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double& e : z.v) e = normal(rng) * noise_w;
    return z;
}

// Each phoneme's log duration from the encoder's output and the noise
// (duration_noise), both over the same phonemes. Every step is a
// convolution of known reach (duration_reach) or per phoneme,
// so a phoneme's result depends only on the phonemes that near it.
std::vector<double> TextToLatentNetwork::log_durations(const Signal& enc,
                                                       const std::vector<double>* g,
                                                       Signal z) const {
    Signal x = conv1d(enc, conv("dp.pre"), 1, 0, 0);
    if (g) add_speaker(x, "dp.cond", *g);
    dds(x, "dp.convs");
    x = conv1d(x, conv("dp.proj"), 1, 0, 0);
    const int bins = hp_.spline_bins;
    const double scale = 1.0 / std::sqrt(double(hp_.hidden_channels));
    for (int f = 0; f < hp_.dp_flows; ++f) {
        std::swap_ranges(z.row(0), z.row(0) + z.t, z.row(1));  // Flip
        const std::string r = "dp.flows." + std::to_string(7 - 2 * f);
        Signal x0(1, z.t);
        std::copy(z.row(0), z.row(0) + z.t, x0.row(0));
        Signal h = conv1d(x0, conv(r + ".pre"), 1, 0, 0);
        add(h, x);
        dds(h, r + ".convs");
        h = conv1d(h, conv(r + ".proj"), 1, 0, 0);
        const std::size_t nb = static_cast<std::size_t>(bins);
        std::vector<double> uw(nb), uh(nb), ud(nb - 1);
        for (int t = 0; t < z.t; ++t) {
            for (int i = 0; i < bins; ++i) {
                uw[std::size_t(i)] = h.row(i)[t] * scale;
                uh[std::size_t(i)] = h.row(bins + i)[t] * scale;
                if (i < bins - 1) ud[std::size_t(i)] = h.row(2 * bins + i)[t];
            }
            z.row(1)[t] = inverse_spline(z.row(1)[t], uw.data(), uh.data(), ud.data(), bins);
        }
    }
    std::swap_ranges(z.row(0), z.row(0) + z.t, z.row(1));  // the last Flip
    const auto& m = t("dp.flows.0.m").values;
    const auto& e = t("dp.flows.0.exp_neg_logs").values;
    std::vector<double> logw(static_cast<std::size_t>(z.t));
    for (int i = 0; i < z.t; ++i) logw[std::size_t(i)] = (z.row(0)[i] - m[0]) * e[0];
    return logw;
}

// Adds conv(g) (a 1x1 conv of the speaker vector) to every frame.
void TextToLatentNetwork::add_speaker(Signal& x, const std::string& role,
                                      const std::vector<double>& g) const {
    Signal gs(int(g.size()), 1);
    gs.v = g;
    const Signal c = conv1d(gs, conv(role), 1, 0, 0);
    for (int ch = 0; ch < x.c; ++ch)
        for (int i = 0; i < x.t; ++i) x.row(ch)[i] += c.v[std::size_t(ch)];
}

}  // namespace etude::engine::vits_host
