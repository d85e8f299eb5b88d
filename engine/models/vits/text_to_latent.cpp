#include "engine/models/vits/text_to_latent.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/error.h"
#include "gpu/cpu/cpu_parallel.h"
#include "gpu/cpu/cpu_vector_math.h"

namespace etude::engine {

namespace {

// A [channels][length] signal in double precision. One sentence, batch 1,
// no padding: every mask of Piper's code is all ones here.
struct Signal {
    int c = 0, t = 0;
    std::vector<double> v;
    Signal() = default;
    Signal(int channels, int length)
        : c(channels), t(length), v(std::size_t(channels) * length, 0.0) {}
    double* row(int i) { return v.data() + std::size_t(i) * t; }
    const double* row(int i) const { return v.data() + std::size_t(i) * t; }
};

struct Conv {
    const VitsTensor* w = nullptr;
    const VitsTensor* b = nullptr;  // may be null
};

// Single-precision scratch that is written before it is read (no zeroing).
std::unique_ptr<float[]> float_scratch(std::size_t n) {
    return std::unique_ptr<float[]>(new float[n]);
}

// One time slice's im2col, as floats: columns[i*k + kk][j] is input channel i
// at time t_begin + j + kk*dilation - pad_left, or 0 where the source has no
// such time. The source holds times [src_begin, src_end): channel i's time t
// at src[i*stride + t - src_begin].
template <class T>
void gather_columns(const T* src, std::size_t stride, int src_begin, int src_end, int channels,
                    int k, int dilation, int pad_left, int t_begin, int len, float* columns) {
    for (int i = 0; i < channels; ++i)
        for (int kk = 0; kk < k; ++kk) {
            float* cr = columns + (std::size_t(i) * k + kk) * len;
            const T* row = src + std::size_t(i) * stride;
            // Column j reads time j + shift.
            const int shift = kk * dilation - pad_left + t_begin;
            const int j0 = std::clamp(src_begin - shift, 0, len);
            const int j1 = std::clamp(src_end - shift, j0, len);
            std::fill(cr, cr + j0, 0.0f);
            for (int j = j0; j < j1; ++j) cr[j] = static_cast<float>(row[j + shift - src_begin]);
            std::fill(cr + j1, cr + len, 0.0f);
        }
}

// product[out][len] = w[out][rows] columns[rows][len], on this thread.
void slice_product(const Conv& conv, int rows, const float* columns, int len, float* product) {
    const int out = int(conv.w->dims[0]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, len, rows, 1.0f,
                conv.w->values.data(), rows, columns, len, 0.0f, product, len);
}

double bias_of(const Conv& conv, int o) {
    return conv.b ? conv.b->values[std::size_t(o)] : 0.0;
}

// y[o][t_begin + j] = b[o] + product[o][j] for one time slice, in double.
void write_slice(const Conv& conv, const float* product, int len, Signal& y, int t_begin) {
    for (int o = 0; o < y.c; ++o) {
        const double bias = bias_of(conv, o);
        const float* pr = product + std::size_t(o) * len;
        double* yr = y.row(o) + t_begin;
        for (int j = 0; j < len; ++j) yr[j] = bias + pr[j];
    }
}

// Time slices of a convolution's output over the CPU backend's workers,
// one per 512 Ki multiply-adds (the worker pool's loop costs microseconds):
// at 4 Mi, as when each loop was an OpenMP fork, a 125-phoneme sentence's
// 1x1 convolutions and duration predictor ran on one thread.
template <class Body>
void over_time_slices(int length, std::size_t macs, Body&& body) {
    gpu::cpu::parallel_ranges(
        std::size_t(length), gpu::cpu::jobs_for(macs, std::size_t(1) << 19), 16,
        [&](std::size_t begin, std::size_t end) { body(int(begin), int(end - begin)); });
}

// PyTorch's conv1d (one group): y[o][t] = b[o] + sum_{i,k} w[o][i][k] x[i][t + k*d - pad_l].
// One single-precision GEMM on the input's columns (im2col) per time slice,
// the slices over the CPU backend's workers: the text encoder's
// convolutions are most of the work before a sentence's first audio. Each
// worker gathers its own columns and writes its own outputs, so nothing
// around the GEMMs runs on one thread alone. The products are float, as in
// Piper's own ONNX Runtime; the sums around them (residuals, norms,
// softmax) stay double. The weights are used where they lie.
Signal conv1d(const Signal& x, const Conv& conv, int dilation, int pad_left, int pad_right) {
    const auto& dims = conv.w->dims;
    const int out = int(dims[0]), in = int(dims[1]), k = int(dims[2]);
    const int length = x.t + pad_left + pad_right - dilation * (k - 1);
    Signal y(out, std::max(length, 0));
    const int rows = in * k;
    over_time_slices(y.t, std::size_t(out) * rows * y.t, [&](int t_begin, int len) {
        const auto columns = float_scratch(std::size_t(rows) * len);
        const auto product = float_scratch(std::size_t(out) * len);
        gather_columns(x.v.data(), std::size_t(x.t), 0, x.t, in, k, dilation, pad_left, t_begin,
                       len, columns.get());
        slice_product(conv, rows, columns.get(), len, product.get());
        write_slice(conv, product.get(), len, y, t_begin);
    });
    return y;
}

// Over the channels at each time of columns [t0, t0 + len), in passes
// along the rows (contiguous).
void layer_norm_columns(Signal& x, int t0, int len, const VitsTensor& gamma,
                        const VitsTensor& beta) {
    std::vector<double> mean(std::size_t(len), 0.0), var(std::size_t(len), 0.0);
    for (int c = 0; c < x.c; ++c) {
        const double* r = x.row(c) + t0;
        for (int j = 0; j < len; ++j) mean[std::size_t(j)] += r[j];
    }
    for (double& m : mean) m /= x.c;
    for (int c = 0; c < x.c; ++c) {
        const double* r = x.row(c) + t0;
        for (int j = 0; j < len; ++j) {
            const double d = r[j] - mean[std::size_t(j)];
            var[std::size_t(j)] += d * d;
        }
    }
    for (double& v : var) v = 1.0 / std::sqrt(v / x.c + 1e-5);
    for (int c = 0; c < x.c; ++c) {
        double* r = x.row(c) + t0;
        const double g = gamma.values[std::size_t(c)], b = beta.values[std::size_t(c)];
        for (int j = 0; j < len; ++j)
            r[j] = (r[j] - mean[std::size_t(j)]) * var[std::size_t(j)] * g + b;
    }
}

void layer_norm(Signal& x, const VitsTensor& gamma, const VitsTensor& beta) {
    layer_norm_columns(x, 0, x.t, gamma, beta);
}

void add(Signal& x, const Signal& y) {
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] += y.v[i];
}

double softplus(double x) {
    return x > 20 ? x : std::log1p(std::exp(x));
}

class Network {
  public:
    // ffn: each encoder layer's two feed-forward convolutions for Winograd
    // (conv_1 then conv_2, layer by layer), or empty to run them directly.
    Network(const VitsWeights& w, std::span<const WinogradConv3> ffn)
        : w_(w), hp_(w.hp), ffn_(ffn) {}

    Conv conv(const std::string& role, bool bias = true) const {
        return {&w_.get(role + ".weight"), bias ? &w_.get(role + ".bias") : nullptr};
    }
    const VitsTensor& t(const std::string& role) const { return w_.get(role); }

    // ---- text encoder ----

    Signal attention(const Signal& x, const std::string& a) const {
        const Signal q = conv1d(x, conv(a + ".conv_q"), 1, 0, 0);
        const Signal k = conv1d(x, conv(a + ".conv_k"), 1, 0, 0);
        const Signal v = conv1d(x, conv(a + ".conv_v"), 1, 0, 0);
        const auto& rel_k = t(a + ".emb_rel_k").values;
        const auto& rel_v = t(a + ".emb_rel_v").values;
        const int heads = hp_.n_heads, kc = hp_.hidden_channels / heads, n = x.t, win = hp_.window;
        const int rel = 2 * win + 1;  // relative positions -win..win
        const double scale = 1.0 / std::sqrt(double(kc));
        Signal out(x.c, n);
        // Per head, as single-precision GEMMs (the products in float, as
        // Piper's own ONNX Runtime makes them; the softmax's sums in
        // double): the scores S = (q/sqrt(kc))^T k plus, on the band
        // |j - i| <= win, the scaled query times the relative key of offset
        // j - i; a softmax per row; then out = P v^T plus, on the same band,
        // P times the relative values. Rows of `scores` are query positions.
        // The heads are independent (each writes its own rows of `out`):
        // one per worker.
        const std::vector<float> rk(rel_k.begin(), rel_k.begin() + std::ptrdiff_t(rel) * kc),
            rv(rel_v.begin(), rel_v.begin() + std::ptrdiff_t(rel) * kc);
        gpu::cpu::parallel_for(heads, [&](int h) {
            const std::size_t nn = std::size_t(n), nk = std::size_t(n) * kc;
            const auto scores = float_scratch(nn * nn), band = float_scratch(nn * rel),
                       qt = float_scratch(nk), kh = float_scratch(nk), vh = float_scratch(nk),
                       head_out = float_scratch(nk);
            for (int c = 0; c < kc; ++c) {
                const double *qr = q.row(h * kc + c), *kr = k.row(h * kc + c),
                             *vr = v.row(h * kc + c);
                for (int i = 0; i < n; ++i) {
                    qt[std::size_t(i) * kc + c] = static_cast<float>(qr[i] * scale);
                    kh[std::size_t(c) * n + i] = static_cast<float>(kr[i]);
                    vh[std::size_t(c) * n + i] = static_cast<float>(vr[i]);
                }
            }
            // scores[i][j] = sum_c qt[i][c] k[c][j]
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, kc, 1.0f, qt.get(), kc,
                        kh.get(), n, 0.0f, scores.get(), n);
            // band[i][r] = sum_c qt[i][c] rel_k[r][c]
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rel, kc, 1.0f, qt.get(), kc,
                        rk.data(), kc, 0.0f, band.get(), rel);
            for (int i = 0; i < n; ++i) {
                float* row = scores.get() + std::size_t(i) * n;
                float* bi = band.get() + std::size_t(i) * rel;
                const int j0 = std::max(0, i - win), j1 = std::min(n - 1, i + win);
                for (int j = j0; j <= j1; ++j) row[j] += bi[j - i + win];
                const float top = *std::max_element(row, row + n);
                for (int j = 0; j < n; ++j) row[j] -= top;
                gpu::cpu::exp(row, row, std::size_t(n));
                double sum = 0;
                for (int j = 0; j < n; ++j) sum += row[j];
                const float inverse = static_cast<float>(1.0 / sum);
                for (int j = 0; j < n; ++j) row[j] *= inverse;
                // band now holds the probabilities on the band, for the
                // relative values.
                for (int r = 0; r < rel; ++r) {
                    const int j = i + r - win;
                    bi[r] = j >= 0 && j < n ? row[j] : 0.0f;
                }
            }
            // head_out[i][c] = sum_j P[i][j] v[c][j] + sum_r band[i][r] rel_v[r][c]
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, kc, n, 1.0f, scores.get(), n,
                        vh.get(), n, 0.0f, head_out.get(), kc);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, kc, rel, 1.0f, band.get(),
                        rel, rv.data(), kc, 1.0f, head_out.get(), kc);
            for (int c = 0; c < kc; ++c)
                for (int i = 0; i < n; ++i)
                    out.row(h * kc + c)[i] = head_out[std::size_t(i) * kc + c];
        });
        return conv1d(out, conv(a + ".conv_o"), 1, 0, 0);
    }

    // conv_2(relu(conv_1(x))), both of kernel k with "same" padding, one
    // time slice per worker from start to end: each makes the hidden
    // frames its slice reads (its own and conv_2's reach of k/2 each side,
    // a few frames made twice) and keeps them as floats, the precision
    // conv_2's GEMM reads them in, so the wide hidden signal never goes
    // through memory in double.
    Signal feed_forward(const Signal& x, const std::string& f) const {
        const Conv c1 = conv(f + ".conv_1"), c2 = conv(f + ".conv_2");
        const int k = hp_.ffn_kernel, pad_left = (k - 1) / 2, pad_right = k / 2, n = x.t;
        const int hidden = int(c1.w->dims[0]), out = int(c2.w->dims[0]);
        Signal y(out, n);
        const std::size_t macs = std::size_t(hidden) * k * (x.c + out) * n;
        over_time_slices(n, macs, [&](int t_begin, int len) {
            const int h0 = std::max(0, t_begin - pad_left);
            const int h1 = std::min(n, t_begin + len + pad_right), hl = h1 - h0;
            const auto columns = float_scratch(
                std::size_t(k) * std::max(std::size_t(x.c) * hl, std::size_t(hidden) * len));
            const auto h = float_scratch(std::size_t(hidden) * hl);
            gather_columns(x.v.data(), std::size_t(n), 0, n, x.c, k, 1, pad_left, h0, hl,
                           columns.get());
            slice_product(c1, x.c * k, columns.get(), hl, h.get());
            for (int o = 0; o < hidden; ++o) {
                const double bias = bias_of(c1, o);
                float* hr = h.get() + std::size_t(o) * hl;
                for (int j = 0; j < hl; ++j)
                    hr[j] = static_cast<float>(std::max(bias + hr[j], 0.0));
            }
            const auto product = float_scratch(std::size_t(out) * len);
            gather_columns(h.get(), std::size_t(hl), h0, h1, hidden, k, 1, pad_left, t_begin, len,
                           columns.get());
            slice_product(c2, hidden * k, columns.get(), len, product.get());
            write_slice(c2, product.get(), len, y, t_begin);
        });
        return y;
    }

    // The same feed-forward block through Winograd's F(2, 3)
    // (winograd_conv3.h), in five steps each spread over the workers: the
    // input's transform by channel, conv_1's GEMMs by transform point,
    // conv_1's outputs with bias and ReLU (rounded to float, as the direct
    // path keeps them) transformed again by channel, conv_2's GEMMs by
    // point, and its outputs by channel. Splitting the GEMMs by point rather
    // than by time keeps each one as wide as the sentence, where OpenBLAS
    // is fastest.
    Signal feed_forward(const Signal& x, const WinogradConv3& c1, const WinogradConv3& c2) const {
        constexpr int points = WinogradConv3::kPoints;
        const int n = x.t, tiles = WinogradConv3::tiles(n);
        const int hidden = c1.out_channels(), out = c2.out_channels();
        const std::size_t in_plane = std::size_t(x.c) * tiles,
                          hidden_plane = std::size_t(hidden) * tiles,
                          out_plane = std::size_t(out) * tiles;
        const auto v1 = float_scratch(points * in_plane), m1 = float_scratch(points * hidden_plane),
                   v2 = float_scratch(points * hidden_plane),
                   m2 = float_scratch(points * out_plane);
        const auto over_channels = [&](int channels, auto&& body) {
            gpu::cpu::parallel_ranges(
                std::size_t(channels),
                gpu::cpu::jobs_for(std::size_t(channels) * n * 32, std::size_t(1) << 16), 1,
                [&](std::size_t begin, std::size_t end) { body(int(begin), int(end)); });
        };
        const auto gemms = [&](const WinogradConv3& c, const float* v, float* m) {
            gpu::cpu::parallel_for(points, [&](int p) { c.multiply(p, v, tiles, m); });
        };
        over_channels(x.c, [&](int begin, int end) {
            for (int c = begin; c < end; ++c)
                WinogradConv3::transform_input(x.row(c), n, v1.get() + std::size_t(c) * tiles,
                                               in_plane);
        });
        gemms(c1, v1.get(), m1.get());
        over_channels(hidden, [&](int begin, int end) {
            std::vector<double> row(static_cast<std::size_t>(n));
            std::vector<float> h(static_cast<std::size_t>(n));
            for (int o = begin; o < end; ++o) {
                WinogradConv3::transform_output(m1.get() + std::size_t(o) * tiles, hidden_plane, n,
                                                row.data());
                const double bias = c1.bias(o);
                for (int j = 0; j < n; ++j)
                    h[std::size_t(j)] =
                        static_cast<float>(std::max(bias + row[std::size_t(j)], 0.0));
                WinogradConv3::transform_input(h.data(), n, v2.get() + std::size_t(o) * tiles,
                                               hidden_plane);
            }
        });
        gemms(c2, v2.get(), m2.get());
        Signal y(out, n);
        over_channels(out, [&](int begin, int end) {
            for (int o = begin; o < end; ++o) {
                double* yr = y.row(o);
                WinogradConv3::transform_output(m2.get() + std::size_t(o) * tiles, out_plane, n,
                                                yr);
                const double bias = c2.bias(o);
                for (int j = 0; j < n; ++j) yr[j] += bias;
            }
        });
        return y;
    }

    Signal text_encoder(std::span<const std::int64_t> ids) const {
        const auto& emb = t("enc_p.emb.weight");
        const int h = hp_.hidden_channels;
        Signal x(h, int(ids.size()));
        const double scale = std::sqrt(double(h));
        for (int i = 0; i < x.t; ++i)
            for (int c = 0; c < h; ++c)
                x.row(c)[i] = emb.values[std::size_t(ids[std::size_t(i)]) * h + c] * scale;
        for (int l = 0; l < hp_.n_layers; ++l) {
            const std::string n = std::to_string(l);
            add(x, attention(x, "enc_p.encoder.attn_layers." + n));
            layer_norm(x, t("enc_p.encoder.norm_layers_1." + n + ".gamma"),
                       t("enc_p.encoder.norm_layers_1." + n + ".beta"));
            add(x, ffn_.empty()
                       ? feed_forward(x, "enc_p.encoder.ffn_layers." + n)
                       : feed_forward(x, ffn_[std::size_t(2 * l)], ffn_[std::size_t(2 * l + 1)]));
            layer_norm(x, t("enc_p.encoder.norm_layers_2." + n + ".gamma"),
                       t("enc_p.encoder.norm_layers_2." + n + ".beta"));
        }
        return x;
    }

    // ---- duration predictor ----

    // DDSConv: each layer is a depthwise dilated convolution, layer norm,
    // GELU, a 1x1 convolution, layer norm and GELU, added to its input.
    // One time slice per worker from start to end: the slice reads its
    // input with the depthwise kernel's reach each side and writes only its
    // own columns of the layer's output, which is added once all are made.
    void dds(Signal& x, const std::string& r) const {
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
                        gpu::cpu::gelu(y.row(c) + t0, y.row(c) + t0, std::size_t(len));
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
    int duration_reach() const {
        const int k = hp_.dp_kernel;
        return (k - 1) / 2 * (1 + k + k * k) * (1 + hp_.dp_flows);
    }

    // Inverse of the rational-quadratic spline on [-bound, bound] (identity
    // outside), as piper_train/vits/transforms.py computes it.
    static double inverse_spline(double x, const double* uw, const double* uh, const double* ud,
                                 int bins) {
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
    static Signal duration_noise(int length, double noise_w, std::mt19937_64& rng) {
        Signal z(2, length);
        std::normal_distribution<double> normal(0.0, 1.0);
        for (double& e : z.v) e = normal(rng) * noise_w;
        return z;
    }

    // Each phoneme's log duration from the encoder's output and the noise
    // (duration_noise), both over the same phonemes. Every step is a
    // convolution of known reach (Network::duration_reach) or per phoneme,
    // so a phoneme's result depends only on the phonemes that near it.
    std::vector<double> log_durations(const Signal& enc, const std::vector<double>* g,
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
    void add_speaker(Signal& x, const std::string& role, const std::vector<double>& g) const {
        Signal gs(int(g.size()), 1);
        gs.v = g;
        const Signal c = conv1d(gs, conv(role), 1, 0, 0);
        for (int ch = 0; ch < x.c; ++ch)
            for (int i = 0; i < x.t; ++i) x.row(ch)[i] += c.v[std::size_t(ch)];
    }

    // ---- flow (reverse) ----

    void flow(Signal& z, const std::vector<double>* g) const {
        const int half = z.c / 2, hid = hp_.hidden_channels, k = hp_.wn_kernel;
        for (int f = hp_.flow_couplings - 1; f >= 0; --f) {
            for (int a = 0, b = z.c - 1; a < b; ++a, --b)  // Flip: reverse the channels
                std::swap_ranges(z.row(a), z.row(a) + z.t, z.row(b));
            const std::string r = "flow.flows." + std::to_string(2 * f);
            Signal x0(half, z.t);
            std::copy(z.v.begin(), z.v.begin() + std::ptrdiff_t(x0.v.size()), x0.v.begin());
            Signal x = conv1d(x0, conv(r + ".pre"), 1, 0, 0);
            Signal cond;
            if (g) {
                Signal gs(int(g->size()), 1);
                gs.v = *g;
                cond = conv1d(gs, conv(r + ".enc.cond_layer"), 1, 0, 0);
            }
            Signal output(hid, z.t);
            for (int l = 0; l < hp_.wn_layers; ++l) {
                const std::string n = std::to_string(l);
                Signal in = conv1d(x, conv(r + ".enc.in_layers." + n), 1, (k - 1) / 2, (k - 1) / 2);
                if (g)
                    for (int c = 0; c < 2 * hid; ++c)
                        for (int i = 0; i < in.t; ++i)
                            in.row(c)[i] += cond.v[std::size_t(l * 2 * hid + c)];
                Signal acts(hid, z.t);
                for (int c = 0; c < hid; ++c)
                    for (int i = 0; i < z.t; ++i)
                        acts.row(c)[i] =
                            std::tanh(in.row(c)[i]) / (1.0 + std::exp(-in.row(hid + c)[i]));
                const Signal rs = conv1d(acts, conv(r + ".enc.res_skip_layers." + n), 1, 0, 0);
                if (l < hp_.wn_layers - 1) {
                    for (int c = 0; c < hid; ++c)
                        for (int i = 0; i < z.t; ++i) {
                            x.row(c)[i] += rs.row(c)[i];
                            output.row(c)[i] += rs.row(hid + c)[i];
                        }
                } else {
                    add(output, rs);
                }
            }
            const Signal m = conv1d(output, conv(r + ".post"), 1, 0, 0);
            for (int c = 0; c < half; ++c)
                for (int i = 0; i < z.t; ++i) z.row(half + c)[i] -= m.row(c)[i];
        }
    }

  private:
    const VitsWeights& w_;
    const VitsHyperparameters& hp_;
    std::span<const WinogradConv3> ffn_;
};

}  // namespace

VitsPrior::VitsPrior(int channels, std::vector<double> stats, std::vector<int> durations,
                     int frames, double noise_scale, std::uint64_t seed)
    : channels_(channels),
      frames_(frames),
      phonemes_(channels > 0 ? int(stats.size() / (2 * std::size_t(channels))) : 0),
      stats_(std::move(stats)),
      durations_(std::move(durations)),
      noise_scale_(noise_scale),
      noise_(seed) {
    if (stats_.size() != std::size_t(2) * channels_ * phonemes_ ||
        durations_.size() > std::size_t(phonemes_))
        throw std::logic_error("VITS prior: the statistics do not match the phonemes");
}

void VitsPrior::sample(int first, int count, float* out) {
    if (first != next_frame_ || count < 0 || first + count > frames_)
        throw std::logic_error("VITS prior: frames " + std::to_string(first) + " to " +
                               std::to_string(first + count) + " asked for, the next is " +
                               std::to_string(next_frame_) + " of " + std::to_string(frames_));
    for (int j = 0; j < count; ++j, ++next_frame_) {
        // The phoneme this frame belongs to; none (mean 0, deviation 1)
        // for the one frame of a sentence whose durations are all zero.
        while (phoneme_ < int(durations_.size()) && left_in_phoneme_ == 0)
            left_in_phoneme_ = durations_[std::size_t(phoneme_++)];
        const int p = left_in_phoneme_ > 0 ? phoneme_ - 1 : -1;
        if (left_in_phoneme_ > 0) --left_in_phoneme_;
        for (int c = 0; c < channels_; ++c) {
            const double m = p < 0 ? 0.0 : stats_[std::size_t(c) * phonemes_ + p];
            const double logs = p < 0 ? 0.0 : stats_[(std::size_t(channels_) + c) * phonemes_ + p];
            out[std::size_t(c) * count + j] =
                static_cast<float>(m + normal_(noise_) * std::exp(logs) * noise_scale_);
        }
    }
}

std::vector<float> VitsPrior::sample_all() {
    std::vector<float> z(std::size_t(channels_) * frames_);
    sample(0, frames_, z.data());
    return z;
}

VitsTextToLatent::VitsTextToLatent(std::shared_ptr<const VitsWeights> weights)
    : w_(std::move(weights)) {
    if (!w_) throw Error("VITS: no weights");
    // Piper's feed-forward convolutions all have kernel 3.
    if (w_->hp.ffn_kernel == 3)
        for (int l = 0; l < w_->hp.n_layers; ++l)
            for (const char* c : {".conv_1", ".conv_2"}) {
                const std::string role = "enc_p.encoder.ffn_layers." + std::to_string(l) + c;
                const VitsTensor& weight = w_->get(role + ".weight");
                if (weight.dims.size() != 3 || weight.dims[2] != 3)
                    throw Error("VITS: " + role + " is not a kernel-3 convolution");
                ffn_.emplace_back(weight.values.data(), w_->get(role + ".bias").values.data(),
                                  int(weight.dims[0]), int(weight.dims[1]));
            }
}

VitsLatent VitsTextToLatent::run(std::span<const std::int64_t> ids, int speaker,
                                 const VitsScales& scales, std::mt19937_64& noise) const {
    VitsLatent out = sample_prior(ids, speaker, scales, noise);
    Signal z(out.channels, out.frames);
    std::copy(out.z.begin(), out.z.end(), z.v.begin());
    const std::vector<double> g = speaker_vector(speaker);
    Network(*w_, ffn_).flow(z, g.empty() ? nullptr : &g);
    out.z.assign(z.v.begin(), z.v.end());
    return out;
}

VitsLatent VitsTextToLatent::sample_prior(std::span<const std::int64_t> ids, int speaker,
                                          const VitsScales& scales, std::mt19937_64& noise) const {
    VitsPrior p = prior(ids, speaker, scales, noise);
    VitsLatent out;
    out.channels = p.channels();
    out.frames = p.frames();
    out.durations = p.durations();
    out.z = p.sample_all();
    return out;
}

std::vector<double> VitsTextToLatent::speaker_vector(int speaker) const {
    const auto& hp = w_->hp;
    if (hp.num_speakers <= 1) return {};
    if (speaker < 0 || speaker >= hp.num_speakers)
        throw Error("VITS: speaker " + std::to_string(speaker) + " is outside the voice's " +
                    std::to_string(hp.num_speakers) + " speakers");
    const auto& emb = w_->get("emb_g.weight").values;
    return {emb.begin() + std::ptrdiff_t(speaker) * hp.gin_channels,
            emb.begin() + std::ptrdiff_t(speaker + 1) * hp.gin_channels};
}

namespace {

// Columns [t0, t1) of a signal.
Signal columns(const Signal& x, int t0, int t1) {
    Signal y(x.c, t1 - t0);
    for (int c = 0; c < x.c; ++c) std::copy(x.row(c) + t0, x.row(c) + t1, y.row(c));
    return y;
}

// Durations of phonemes [from, to) of `logw` (indexed from phoneme 0)
// appended to `durations`, scaled and rounded up as Piper does; returns
// their frames, at most kMaxFrames + 1 (so a sum cannot overflow).
int append_durations(const std::vector<double>& logw, int from, int to, double length_scale,
                     std::vector<int>& durations) {
    constexpr int limit = VitsTextToLatent::kMaxFrames;
    int total = 0;
    for (int i = from; i < to; ++i) {
        const double d = std::ceil(std::exp(logw[std::size_t(i)]) * length_scale);
        const int frames = d > 0 ? int(std::min(d, double(limit) + 1)) : 0;
        durations.push_back(frames);
        total = int(std::min<long long>(static_cast<long long>(total) + frames, limit + 1LL));
    }
    return total;
}

// A sentence longer than this is a broken voice or an absurd
// length_scale; refusing it keeps memory bounded (the latent is
// inter_channels floats per frame, twice).
void check_total(int total) {
    if (total > VitsTextToLatent::kMaxFrames)
        throw Error("VITS: the durations add up to " + std::to_string(total) + " frames (at most " +
                    std::to_string(VitsTextToLatent::kMaxFrames) +
                    "): length_scale too large, or a broken voice");
}

}  // namespace

// What a staged prior keeps for its later durations: the encoder's output
// and the predictor's noise for the whole sentence (drawn with the first
// ones, so the caller's generator moves as for a whole prior).
struct VitsPrior::PendingDurations {
    std::shared_ptr<const VitsWeights> weights;
    Signal enc, noise;
    std::vector<double> speaker;  // empty for one speaker
    double length_scale = 1;
};

void VitsPrior::complete_durations() {
    if (!pending_) return;
    const PendingDurations& p = *pending_;
    const Network net(*p.weights, {});
    // The whole sentence, as a whole prior makes it; the first durations
    // (already in use) are kept as they were made.
    const std::vector<double> logw =
        net.log_durations(p.enc, p.speaker.empty() ? nullptr : &p.speaker, p.noise);
    const int known = int(durations_.size());
    std::vector<int> rest;
    const long long total = static_cast<long long>(frames_) +
                            append_durations(logw, known, p.enc.t, p.length_scale, rest);
    check_total(int(std::min<long long>(total, VitsTextToLatent::kMaxFrames + 1LL)));
    durations_.insert(durations_.end(), rest.begin(), rest.end());
    frames_ = std::max(int(total), 1);
    pending_.reset();
}

int VitsTextToLatent::duration_reach() const {
    return Network(*w_, {}).duration_reach();
}

VitsPrior VitsTextToLatent::prior(std::span<const std::int64_t> ids, int speaker,
                                  const VitsScales& scales, std::mt19937_64& noise,
                                  PriorDurations staging) const {
    const auto& hp = w_->hp;
    if (ids.empty()) throw Error("VITS: no phoneme ids");
    for (auto id : ids)
        if (id < 0 || id >= hp.num_symbols)
            throw Error("VITS: phoneme id " + std::to_string(id) + " is outside the voice's " +
                        std::to_string(hp.num_symbols) + " symbols");
    const auto finite_at_least = [](float v, float low) { return std::isfinite(v) && v >= low; };
    if (!finite_at_least(scales.noise_scale, 0) || !finite_at_least(scales.noise_w, 0))
        throw Error("VITS: noise_scale and noise_w must be finite and not negative");
    if (!finite_at_least(scales.length_scale, 0) || scales.length_scale == 0)
        throw Error("VITS: length_scale must be finite and positive");
    std::vector<double> g = speaker_vector(speaker);
    const Network net(*w_, ffn_);
    const std::vector<double>* gp = g.empty() ? nullptr : &g;

    Signal enc = net.text_encoder(ids);
    Signal stats = conv1d(enc, net.conv("enc_p.proj"), 1, 0, 0);
    const int phonemes = enc.t;
    Signal dp_noise = Network::duration_noise(phonemes, scales.noise_w, noise);
    const double length_scale = scales.length_scale;

    // Staged: the predictor over the first phonemes and its reach beyond
    // them, whose durations are exact for those phonemes.
    const int known = kStagedPhonemes, window = known + net.duration_reach();
    const bool staged = staging == PriorDurations::Staged && phonemes > window;
    std::vector<int> durations;
    int total = 0;
    if (staged) {
        const std::vector<double> logw =
            net.log_durations(columns(enc, 0, window), gp, columns(dp_noise, 0, window));
        total = append_durations(logw, 0, known, length_scale, durations);
    } else {
        const std::vector<double> logw = net.log_durations(enc, gp, dp_noise);
        total = append_durations(logw, 0, phonemes, length_scale, durations);
    }
    check_total(total);
    VitsPrior prior(hp.inter_channels, std::move(stats.v), std::move(durations),
                    staged ? total : std::max(total, 1), double(scales.noise_scale), noise());
    if (staged) {
        auto pending = std::make_shared<VitsPrior::PendingDurations>();
        pending->weights = w_;
        pending->enc = std::move(enc);
        pending->noise = std::move(dp_noise);
        pending->speaker = std::move(g);
        pending->length_scale = length_scale;
        prior.pending_ = std::move(pending);
        // A sentence whose first phonemes already promise more frames than
        // the limit (an absurd length_scale) is refused here, before any of
        // it is heard.
        if (static_cast<double>(total) / known * phonemes > kMaxFrames) prior.complete_durations();
    }
    return prior;
}

}  // namespace etude::engine
