// The host ops of text_to_latent_ops.h: conv1d as one single-precision GEMM
// per time slice, and layer norm.
#include "engine/models/vits/text_to_latent_ops.h"

#include <cblas.h>

namespace etude::engine::vits_host {

void slice_product(const Conv& conv, int rows, const float* columns, int len, float* product) {
    const int out = int(conv.w->dims[0]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, len, rows, 1.0f,
                conv.w->values.data(), rows, columns, len, 0.0f, product, len);
}

void write_slice(const Conv& conv, const float* product, int len, Signal& y, int t_begin) {
    for (int o = 0; o < y.c; ++o) {
        const double bias = bias_of(conv, o);
        const float* pr = product + std::size_t(o) * len;
        double* yr = y.row(o) + t_begin;
        for (int j = 0; j < len; ++j) yr[j] = bias + pr[j];
    }
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

}  // namespace etude::engine::vits_host
