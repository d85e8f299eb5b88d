// The text encoder of VITS' text-to-latent network on the host: phoneme
// embedding, then per layer relative-position attention and the
// feed-forward block (direct, or through Winograd's F(2, 3)), each followed
// by a layer norm.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/models/vits/text_to_latent_network.h"
#include "gpu/host_compute.h"

namespace etude::engine::vits_host {

Signal TextToLatentNetwork::attention(const Signal& x, const std::string& a) const {
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
    gpu::host::parallel_for(heads, [&](int h) {
        const std::size_t nn = std::size_t(n), nk = std::size_t(n) * kc;
        const auto scores = float_scratch(nn * nn), band = float_scratch(nn * rel),
                   qt = float_scratch(nk), kh = float_scratch(nk), vh = float_scratch(nk),
                   head_out = float_scratch(nk);
        for (int c = 0; c < kc; ++c) {
            const double *qr = q.row(h * kc + c), *kr = k.row(h * kc + c), *vr = v.row(h * kc + c);
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
            gpu::host::exp(row, row, std::size_t(n));
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, kc, rel, 1.0f, band.get(), rel,
                    rv.data(), kc, 1.0f, head_out.get(), kc);
        for (int c = 0; c < kc; ++c)
            for (int i = 0; i < n; ++i) out.row(h * kc + c)[i] = head_out[std::size_t(i) * kc + c];
    });
    return conv1d(out, conv(a + ".conv_o"), 1, 0, 0);
}

// conv_2(relu(conv_1(x))), both of kernel k with "same" padding, one
// time slice per worker from start to end: each makes the hidden
// frames its slice reads (its own and conv_2's reach of k/2 each side,
// a few frames made twice) and keeps them as floats, the precision
// conv_2's GEMM reads them in, so the wide hidden signal never goes
// through memory in double.
Signal TextToLatentNetwork::feed_forward(const Signal& x, const std::string& f) const {
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
            for (int j = 0; j < hl; ++j) hr[j] = static_cast<float>(std::max(bias + hr[j], 0.0));
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
Signal TextToLatentNetwork::feed_forward(const Signal& x, const WinogradConv3& c1,
                                         const WinogradConv3& c2) const {
    constexpr int points = WinogradConv3::kPoints;
    const int n = x.t, tiles = WinogradConv3::tiles(n);
    const int hidden = c1.out_channels(), out = c2.out_channels();
    const std::size_t in_plane = std::size_t(x.c) * tiles,
                      hidden_plane = std::size_t(hidden) * tiles,
                      out_plane = std::size_t(out) * tiles;
    const auto v1 = float_scratch(points * in_plane), m1 = float_scratch(points * hidden_plane),
               v2 = float_scratch(points * hidden_plane), m2 = float_scratch(points * out_plane);
    const auto over_channels = [&](int channels, auto&& body) {
        gpu::host::parallel_ranges(
            std::size_t(channels),
            gpu::host::jobs_for(std::size_t(channels) * n * 32, std::size_t(1) << 16), 1,
            [&](std::size_t begin, std::size_t end) { body(int(begin), int(end)); });
    };
    const auto gemms = [&](const WinogradConv3& c, const float* v, float* m) {
        gpu::host::parallel_for(points, [&](int p) { c.multiply(p, v, tiles, m); });
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
                h[std::size_t(j)] = static_cast<float>(std::max(bias + row[std::size_t(j)], 0.0));
            WinogradConv3::transform_input(h.data(), n, v2.get() + std::size_t(o) * tiles,
                                           hidden_plane);
        }
    });
    gemms(c2, v2.get(), m2.get());
    Signal y(out, n);
    over_channels(out, [&](int begin, int end) {
        for (int o = begin; o < end; ++o) {
            double* yr = y.row(o);
            WinogradConv3::transform_output(m2.get() + std::size_t(o) * tiles, out_plane, n, yr);
            const double bias = c2.bias(o);
            for (int j = 0; j < n; ++j) yr[j] += bias;
        }
    });
    return y;
}

Signal TextToLatentNetwork::text_encoder(std::span<const std::int64_t> ids) const {
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

}  // namespace etude::engine::vits_host
