#include "gpu/cpu/cpu_conv.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_direct_conv.h"
#include "gpu/cpu/cpu_parallel.h"

namespace etude::gpu::cpu {
namespace {

// Floats of column buffer per chunk of the time axis (1 MB): short columns
// (few channels, few taps) get long chunks that still sit in the 2 MB L2
// when they are read back; 4 MB chunks measured up to 3x slower for
// 32 channels x 7 taps.
constexpr std::size_t kChunkFloats = std::size_t{1} << 18;
// Tall columns get at least this many per chunk even past kChunkFloats:
// every GEMM call repacks the weights and wakes OpenBLAS's threads, and
// chunks of 128-190 columns measured 10-20% slower (128 channels x 11 taps)
// up to 2x slower (the 256 -> 128 x8 upsampler) than 512. The buffer then
// holds rows x 512 floats: 2.9 MB for 128 x 11, 16 MB at most for 512
// channels x 16 taps.
constexpr int kMinChunkColumns = 512;
// Output samples per block in the depthwise loop: one block of output stays
// in L1 while every tap is added into it.
constexpr int kDepthwiseBlock = 1024;
// A chunk shortened so that every worker gets one keeps at least this many
// columns: below it, a job's SGEMM costs less than waking a thread.
constexpr int kMinParallelColumns = 64;
// A convolution whose time axis is one chunk is split by output channels
// instead, each job at least this many of them, once it has at least
// kRowSplitGrain multiply-adds. 512 Ki since the worker pool (a loop costs
// its helper a compare-exchange, not an OpenMP fork): the VITS flow's 1x1
// convolutions (192 x 192 and 96 x 192 over 40 frames, 0.7-1.5 Mi) then
// use both cores, and its first push went from 13.5 to 12.1 ms (medians of
// 80, alternated with 2 Mi, 2-vCPU AMD EPYC).
constexpr int kMinSliceChannels = 32;
constexpr std::size_t kRowSplitGrain = std::size_t{1} << 19;
// Multiply-adds per job below which a depthwise layer runs on one thread.
constexpr std::size_t kDepthwiseGrain = std::size_t{1} << 16;

// Columns per chunk for columns of `rows` floats over `length` positions.
int chunk_columns(int rows, int length) {
    const std::size_t fit = kChunkFloats / static_cast<std::size_t>(std::max(rows, 1));
    const int cols = static_cast<int>(std::max<std::size_t>(fit, kMinChunkColumns));
    return std::max(1, std::min(cols, length));
}

// The same, balanced over the workers (balanced_chunk) for loops whose jobs
// are the chunks.
int shared_chunk_columns(int rows, int length) {
    return balanced_chunk(length, chunk_columns(rows, length), kMinParallelColumns, worker_count());
}

// The positions j in [0, count) for which first + j*step + offset lies in
// [0, limit), as [lo, hi): the taps that read (or write) inside the signal.
struct Span {
    int lo, hi;
};
Span valid_span(std::ptrdiff_t first, int step, std::ptrdiff_t offset, std::ptrdiff_t limit,
                int count) {
    // Smallest j with j*step >= a, and smallest j with j*step >= b.
    const std::ptrdiff_t a = -offset - first * step;
    const std::ptrdiff_t b = limit - offset - first * step;
    const auto ceil_div = [step](std::ptrdiff_t v) -> std::ptrdiff_t {
        return v <= 0 ? 0 : (v + step - 1) / step;
    };
    const std::ptrdiff_t lo = std::min<std::ptrdiff_t>(ceil_div(a), count);
    const std::ptrdiff_t hi = std::clamp<std::ptrdiff_t>(ceil_div(b), lo, count);
    return {static_cast<int>(lo), static_cast<int>(hi)};
}

void check_shape(const Conv1dShape& s, const char* op) {
    if (s.groups <= 0 || s.in_channels % s.groups != 0 || s.out_channels % s.groups != 0 ||
        s.stride <= 0 || s.dilation <= 0 || s.kernel <= 0)
        throw std::invalid_argument(std::string(op) +
                                    ": channels must divide into groups, and kernel, stride and "
                                    "dilation must be positive");
}

// Columns t0 .. t0+count of the im2col matrix of one group: row ic*kernel+k
// holds x[ic][t*stride - padding + k*dilation], zero outside the signal.
void im2col(const Conv1dShape& s, int channels, const float* x, int t0, int count, float* col) {
    for (int ic = 0; ic < channels; ++ic) {
        const float* xr = x + static_cast<std::size_t>(ic) * s.in_length;
        for (int k = 0; k < s.kernel; ++k) {
            float* row = col + (static_cast<std::size_t>(ic) * s.kernel + k) * count;
            const std::ptrdiff_t offset = std::ptrdiff_t{k} * s.dilation - s.padding;
            const Span v = valid_span(t0, s.stride, offset, s.in_length, count);
            std::fill(row, row + v.lo, 0.0f);
            if (v.hi > v.lo) {
                // Input of column v.lo: inside the signal by construction.
                const float* src = xr + ((std::ptrdiff_t{t0} + v.lo) * s.stride + offset);
                if (s.stride == 1)
                    std::memcpy(row + v.lo, src, sizeof(float) * (v.hi - v.lo));
                else
                    for (int j = 0; j < v.hi - v.lo; ++j)
                        row[v.lo + j] = src[std::ptrdiff_t{j} * s.stride];
            }
            std::fill(row + v.hi, row + count, 0.0f);
        }
    }
}

// Adds columns t0 .. t0+count of one group's col2im matrix (row o*kernel+k
// goes to output o at t*stride - padding + k*dilation) into y.
void col2im_add(const Conv1dShape& s, int channels, int out_len, const float* col, int t0,
                int count, float* y) {
    for (int o = 0; o < channels; ++o) {
        float* yr = y + static_cast<std::size_t>(o) * out_len;
        for (int k = 0; k < s.kernel; ++k) {
            const float* row = col + (static_cast<std::size_t>(o) * s.kernel + k) * count;
            const std::ptrdiff_t offset = std::ptrdiff_t{k} * s.dilation - s.padding;
            const Span v = valid_span(t0, s.stride, offset, out_len, count);
            if (v.hi <= v.lo) continue;
            // Output of column v.lo: inside y by construction.
            float* dst = yr + ((std::ptrdiff_t{t0} + v.lo) * s.stride + offset);
            const float* src = row + v.lo;
            if (s.stride == 1)
                for (int j = 0; j < v.hi - v.lo; ++j) dst[j] += src[j];
            else
                for (int j = 0; j < v.hi - v.lo; ++j) dst[std::ptrdiff_t{j} * s.stride] += src[j];
        }
    }
}

// The direct paths' jobs: body(n, begin, count, o0, o1) for each batch
// item n, chunk [begin, begin + count) of the axis [first, first + total)
// and slice [o0, o1) of the output channels. Chunks as balanced_chunk
// (cpu_parallel.h) makes them, on whole tiles; the output channels are cut
// into slices when there are several workers, enough channels and
// slice_when(chunks) says so.
template <class SliceWhen, class Body>
void direct_jobs(const Conv1dShape& s, int first, int total, int chunk, int min_chunk,
                 SliceWhen&& slice_when, Body&& body) {
    const int workers = worker_count();
    chunk = balanced_chunk(total, chunk, min_chunk, workers, kDirectChunkAlign);
    const int chunks = (total + chunk - 1) / chunk;
    const int slices = workers > 1 && s.out_channels >= 2 * kMinSliceChannels && slice_when(chunks)
                           ? std::min(workers, s.out_channels / kMinSliceChannels)
                           : 1;
    parallel_for(s.batch * chunks * slices, [&](int job) {
        const int slice = job % slices;
        job /= slices;
        const int begin = first + job % chunks * chunk;
        const int o0 = static_cast<int>(static_cast<long long>(s.out_channels) * slice / slices);
        const int o1 =
            static_cast<int>(static_cast<long long>(s.out_channels) * (slice + 1) / slices);
        body(job / chunks, begin, std::min(chunk, first + total - begin), o0, o1);
    });
}

// One channel of a depthwise conv1d:
// y[t] = b + sum over k of w[k] * x[t*stride - padding + k*dilation].
void depthwise_row(const Conv1dShape& s, int out_len, const float* x, const float* w, float b,
                   float* y) {
    // Outputs whose taps all fall inside the signal run without bounds checks.
    const std::ptrdiff_t reach = std::ptrdiff_t{s.kernel - 1} * s.dilation;
    const Span inner = valid_span(0, s.stride, -s.padding, s.in_length - reach, out_len);
    const auto edge = [&](int t) {
        float acc = b;
        for (int k = 0; k < s.kernel; ++k) {
            const std::ptrdiff_t ti =
                std::ptrdiff_t{t} * s.stride - s.padding + std::ptrdiff_t{k} * s.dilation;
            if (ti >= 0 && ti < s.in_length) acc += w[k] * x[ti];
        }
        y[t] = acc;
    };
    for (int t = 0; t < inner.lo; ++t) edge(t);
    for (int t0 = inner.lo; t0 < inner.hi; t0 += kDepthwiseBlock) {
        const int t1 = std::min(inner.hi, t0 + kDepthwiseBlock);
        std::fill(y + t0, y + t1, b);
        for (int k = 0; k < s.kernel; ++k) {
            const float wk = w[k];
            // Input of output t0 through tap k: inside the signal for inner outputs.
            const float* src =
                x + (std::ptrdiff_t{t0} * s.stride - s.padding + std::ptrdiff_t{k} * s.dilation);
            float* dst = y + t0;
            if (s.stride == 1)
                for (int j = 0; j < t1 - t0; ++j) dst[j] += wk * src[j];
            else
                for (int j = 0; j < t1 - t0; ++j) dst[j] += wk * src[std::ptrdiff_t{j} * s.stride];
        }
    }
    for (int t = inner.hi; t < out_len; ++t) edge(t);
}

}  // namespace

void conv1d(const Conv1dShape& s, const float* x, const float* w, const float* bias, float* y) {
    check_shape(s, "conv1d");
    const int out_len = s.conv_out_length();
    if (s.batch <= 0 || s.out_channels <= 0 || out_len <= 0) return;
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;

    if (icg == 1 && ocg == 1) {
        const std::size_t rows = static_cast<std::size_t>(s.batch) * s.out_channels;
        const int jobs = jobs_for(rows * out_len * s.kernel, kDepthwiseGrain);
        parallel_ranges(rows, jobs, 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t row = begin; row < end; ++row) {
                const int c = static_cast<int>(row % s.out_channels);
                depthwise_row(s, out_len, x + row * s.in_length,
                              w + static_cast<std::size_t>(c) * s.kernel, bias ? bias[c] : 0.0f,
                              y + row * out_len);
            }
        });
        return;
    }

    if (direct_conv1d_applies(s)) {
        // A signal of one chunk is cut by output channels once the layer is
        // worth it (the same rule as the SGEMM path below).
        const std::size_t macs =
            static_cast<std::size_t>(s.out_channels) * icg * s.kernel * out_len;
        direct_jobs(
            s, 0, out_len, direct_conv1d_chunk(s), kMinParallelColumns,
            [&](int chunks) { return chunks == 1 && s.batch == 1 && macs >= kRowSplitGrain; },
            [&](int n, int t0, int count, int o0, int o1) {
                direct_conv1d(s, x + static_cast<std::size_t>(n) * s.in_channels * s.in_length, w,
                              bias, y + static_cast<std::size_t>(n) * s.out_channels * out_len, t0,
                              count, o0, o1);
            });
        return;
    }

    // A 1x1 convolution over every sample reads x as its own column matrix.
    const bool pointwise = s.kernel == 1 && s.stride == 1 && s.padding == 0;
    const int rows = icg * s.kernel;  // reduction length of the GEMM
    const int chunk = shared_chunk_columns(rows, out_len);
    const int chunks = (out_len + chunk - 1) / chunk;
    // A time axis of one chunk (a streamed layer's few columns: the VITS
    // flow pushes 32-36 frames through 384 x 960 weights) would be one job;
    // its output channels are then cut into slices for the workers.
    const std::size_t macs = static_cast<std::size_t>(ocg) * rows * out_len;
    const int slices = chunks == 1 && s.batch * s.groups == 1 && worker_count() > 1 &&
                               ocg >= 2 * kMinSliceChannels && macs >= kRowSplitGrain
                           ? std::min(worker_count(), ocg / kMinSliceChannels)
                           : 1;
    // One job per (batch item, group, chunk of the time axis, slice of the
    // output channels): its own im2col, SGEMM and bias, into its own part
    // of y.
    parallel_for(s.batch * s.groups * chunks * slices, [&](int job) {
        const int slice = job % slices;
        job /= slices;
        const int n = job / (s.groups * chunks);
        const int g = job / chunks % s.groups;
        const int t0 = job % chunks * chunk;
        const int count = std::min(chunk, out_len - t0);
        const int o0 = static_cast<int>(static_cast<long long>(ocg) * slice / slices);
        const int o1 = static_cast<int>(static_cast<long long>(ocg) * (slice + 1) / slices);
        const float* xg =
            x + (static_cast<std::size_t>(n) * s.in_channels + static_cast<std::size_t>(g) * icg) *
                    s.in_length;
        const float* wg = w + (static_cast<std::size_t>(g) * ocg + o0) * rows;
        float* yg = y + (static_cast<std::size_t>(n) * s.out_channels +
                         static_cast<std::size_t>(g) * ocg + o0) *
                            out_len;
        const float* b = xg + t0;
        int ldb = s.in_length;
        if (!pointwise) {
            float* col = job_scratch(static_cast<std::size_t>(rows) * chunk);
            im2col(s, icg, xg, t0, count, col);
            b = col;
            ldb = count;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o1 - o0, count, rows, 1.0f, wg, rows,
                    b, ldb, 0.0f, yg + t0, out_len);
        if (bias)
            for (int o = o0; o < o1; ++o) {
                float* yr = yg + static_cast<std::size_t>(o - o0) * out_len + t0;
                const float v = bias[g * ocg + o];
                for (int j = 0; j < count; ++j) yr[j] += v;
            }
    });
}

void conv_transpose1d(const Conv1dShape& s, const float* x, const float* w, const float* bias,
                      float* y) {
    check_shape(s, "conv_transpose1d");
    const int out_len = s.transpose_out_length();
    if (s.batch <= 0 || s.out_channels <= 0 || out_len <= 0) return;
    const int icg = s.in_channels / s.groups, ocg = s.out_channels / s.groups;

    if (direct_conv_transpose1d_applies(s)) {
        // Chunks of input steps: every step's outputs are its own, so jobs
        // never share an output. Channels are sliced when the steps leave a
        // worker without a chunk.
        int first = 0;
        const int steps = direct_conv_transpose1d_steps(s, first);
        direct_jobs(
            s, first, steps, direct_conv_transpose1d_chunk(s), kMinParallelColumns / s.stride,
            [&](int chunks) { return chunks < worker_count(); },
            [&](int n, int q0, int count, int o0, int o1) {
                direct_conv_transpose1d(
                    s, x + static_cast<std::size_t>(n) * s.in_channels * s.in_length, w, bias,
                    y + static_cast<std::size_t>(n) * s.out_channels * out_len, q0, count, o0, o1);
            });
        return;
    }

    // Each job owns a slice of one group's output channels: it fills them
    // with the bias, computes only their rows of W^T x (tap k of channel o is
    // row o*kernel + k) and scatters them, so no two jobs write the same
    // output.
    const int slices = std::min(ocg, worker_count());
    parallel_for(s.batch * s.groups * slices, [&](int job) {
        const int n = job / (s.groups * slices);
        const int g = job / slices % s.groups;
        const int slice = job % slices;
        const int o0 = static_cast<int>(static_cast<long long>(ocg) * slice / slices);
        const int o1 = static_cast<int>(static_cast<long long>(ocg) * (slice + 1) / slices);
        const int oc0 = g * ocg + o0;  // first output channel of the slice
        float* ys = y + (static_cast<std::size_t>(n) * s.out_channels + oc0) * out_len;
        for (int o = 0; o < o1 - o0; ++o) {
            float* yr = ys + static_cast<std::size_t>(o) * out_len;
            std::fill(yr, yr + out_len, bias ? bias[oc0 + o] : 0.0f);
        }
        if (s.in_length <= 0 || o1 == o0) return;

        const int rows = ocg * s.kernel;  // W^T has a row per tap of each output channel
        const int slice_rows = (o1 - o0) * s.kernel;
        const float* xg =
            x + (static_cast<std::size_t>(n) * s.in_channels + static_cast<std::size_t>(g) * icg) *
                    s.in_length;
        // Weights [icg][ocg * kernel] for this group, used transposed; the
        // slice's rows of W^T are its columns of W.
        const float* ws =
            w + static_cast<std::size_t>(g) * icg * rows + static_cast<std::size_t>(o0) * s.kernel;
        // The whole time axis per job: the jobs already split the channels.
        const int chunk = chunk_columns(slice_rows, s.in_length);
        float* col = job_scratch(static_cast<std::size_t>(slice_rows) * chunk);
        for (int t0 = 0; t0 < s.in_length; t0 += chunk) {
            const int count = std::min(chunk, s.in_length - t0);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, slice_rows, count, icg, 1.0f, ws,
                        rows, xg + t0, s.in_length, 0.0f, col, count);
            col2im_add(s, o1 - o0, out_len, col, t0, count, ys);
        }
    });
}

}  // namespace etude::gpu::cpu
