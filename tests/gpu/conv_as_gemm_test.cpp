// A convolution as a strided-batched GEMM (gpu/conv_as_gemm.h), run on the
// host exactly as the CUDA backend runs it: the im2col and bias bodies
// (gpu/kernels/kernel_bodies.h) element by element, then OpenBLAS's
// column-major SGEMM once per batch item with the plan's sizes, leading
// dimensions and strides, which are cuBLAS's arguments. cuBLAS and
// cblas_sgemm(CblasColMajor, ...) take the same arguments to mean the same
// product, so what this checks (the plan, the unfolding, the strides, the
// split of a large batch) is what a GPU would execute; no GPU here runs it.
//
// Inputs are small integers, so every sum is exact in float whatever its
// order: the result equals the direct convolution (conv1d_at) exactly, and
// any difference is an indexing error.
#include "gpu/conv_as_gemm.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <tuple>
#include <vector>

#include "gpu/kernels/kernel_bodies.h"

namespace etude::gpu {
namespace {

std::vector<float> small_integers(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-4, 4);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(d(rng));
    return v;
}

Conv1dShape shape(int batch, int in, int out, int len, int taps, int stride, int dilation,
                  int padding) {
    Conv1dShape s;
    s.batch = batch, s.in_channels = in, s.out_channels = out, s.in_length = len;
    s.kernel = taps, s.stride = stride, s.dilation = dilation, s.padding = padding;
    return s;
}

// The direct convolution, output by output.
std::vector<float> direct(const Conv1dShape& s, const std::vector<float>& x,
                          const std::vector<float>& w, const std::vector<float>* bias) {
    const int out_len = s.conv_out_length();
    std::vector<float> y(std::size_t(s.batch) * s.out_channels * out_len);
    for (std::size_t i = 0; i < y.size(); ++i)
        bodies::conv1d_at(i, x.data(), w.data(), bias ? bias->data() : w.data(), bias ? 1 : 0,
                          y.data(), s.in_channels, s.out_channels, s.in_length, s.kernel, s.stride,
                          s.dilation, s.padding, s.groups, out_len);
    return y;
}

// The plan, run as CudaBackend::conv1d_impl runs it; `calls` counts GEMM
// calls (one per part of the batch).
std::vector<float> as_gemm(const Conv1dShape& s, const ConvAsGemm& g, const std::vector<float>& x,
                           const std::vector<float>& w, const std::vector<float>* bias,
                           int* calls) {
    const int out_len = s.conv_out_length();
    std::vector<float> y(std::size_t(s.batch) * s.out_channels * out_len, -99.0f);
    if (bias)
        for (std::size_t i = 0; i < y.size(); ++i)
            bodies::bias_rows_at(i, g.n, g.m, bias->data(), y.data());
    std::vector<float> scratch(g.unfolded_floats_per_item * std::size_t(g.items_per_call));
    const float beta = bias ? 1.0f : 0.0f;
    *calls = 0;
    for (int first = 0; first < g.batch; first += g.items_per_call) {
        const int items = std::min(g.items_per_call, g.batch - first);
        const float* xs = x.data() + std::size_t(first) * g.x_floats_per_item;
        if (g.unfold)
            for (std::size_t i = 0; i < g.unfolded_floats_per_item * std::size_t(items); ++i)
                bodies::im2col_at(i, xs, scratch.data(), s.in_length, s.kernel, s.stride,
                                  s.dilation, s.padding, out_len);
        const float* a = g.unfold ? scratch.data() : xs;
        float* c = y.data() + std::size_t(first) * std::size_t(g.stride_c);
        // cublasSgemmStridedBatched is this loop: item i's operands at i
        // strides from the first.
        for (int i = 0; i < items; ++i)
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, g.m, g.n, g.k, 1.0f,
                        a + i * g.stride_a, int(g.lda), w.data() + i * g.stride_b, int(g.ldb), beta,
                        c + i * g.stride_c, int(g.ldc));
        ++*calls;
    }
    return y;
}

struct Case {
    Conv1dShape shape;
    bool unfolds;
};

TEST(ConvAsGemm, equals_the_direct_convolution_exactly_for_every_shape) {
    const Case cases[] = {
        {shape(1, 6, 4, 37, 5, 1, 1, 2), true},    // "same", odd kernel
        {shape(3, 5, 7, 50, 3, 1, 5, 5), true},    // dilated, a batch (a flow layer's shape)
        {shape(2, 8, 3, 40, 7, 1, 1, 3), true},    // HiFi-GAN's pre-conv shape
        {shape(4, 4, 6, 33, 11, 1, 3, 15), true},  // kernel 11, dilation 3 (a resblock)
        {shape(2, 3, 5, 29, 4, 3, 2, 1), true},    // stride and dilation, uneven kernel
        {shape(5, 9, 2, 16, 1, 1, 1, 0), false},   // 1x1: the window is the matrix
        {shape(2, 4, 4, 10, 1, 2, 1, 0), true},    // 1x1 with a stride still unfolds
        {shape(1, 2, 3, 3, 5, 1, 1, 2), true},     // shorter than the kernel
        {shape(3, 16, 16, 48, 5, 1, 1, 2), true},  // a larger layer
    };
    for (const Case& c : cases) {
        const Conv1dShape& s = c.shape;
        SCOPED_TRACE(testing::Message()
                     << "batch " << s.batch << " in " << s.in_channels << " out " << s.out_channels
                     << " len " << s.in_length << " taps " << s.kernel << " stride " << s.stride
                     << " dilation " << s.dilation << " padding " << s.padding);
        const auto plan = conv_as_gemm(s);
        ASSERT_TRUE(plan.has_value());
        EXPECT_EQ(plan->unfold, c.unfolds);
        EXPECT_EQ(plan->items_per_call, s.batch);  // all fit under the default bound
        const auto x = small_integers(std::size_t(s.batch) * s.in_channels * s.in_length, 1);
        const auto w = small_integers(std::size_t(s.out_channels) * s.in_channels * s.kernel, 2);
        const auto bias = small_integers(std::size_t(s.out_channels), 3);
        int calls = 0;
        EXPECT_EQ(as_gemm(s, *plan, x, w, &bias, &calls), direct(s, x, w, &bias));
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(as_gemm(s, *plan, x, w, nullptr, &calls), direct(s, x, w, nullptr));
    }
}

TEST(ConvAsGemm, a_batch_past_the_scratch_bound_runs_in_parts_with_the_same_result) {
    Conv1dShape s;
    s.batch = 7, s.in_channels = 6, s.out_channels = 5, s.in_length = 30, s.kernel = 3;
    s.dilation = 2, s.padding = 2;
    const std::size_t per_item = std::size_t(6 * 3) * std::size_t(s.conv_out_length());
    const auto x = small_integers(std::size_t(s.batch) * s.in_channels * s.in_length, 4);
    const auto w = small_integers(std::size_t(s.out_channels) * s.in_channels * s.kernel, 5);
    const auto bias = small_integers(std::size_t(s.out_channels), 6);
    const auto want = direct(s, x, w, &bias);
    // Room for 3 items, then for less than one (one item per call).
    for (const auto& [bound, per_call, calls_expected] :
         {std::tuple{3 * per_item + 1, 3, 3}, std::tuple{per_item / 2, 1, 7}}) {
        const auto plan = conv_as_gemm(s, bound);
        ASSERT_TRUE(plan.has_value());
        EXPECT_EQ(plan->items_per_call, per_call);
        int calls = 0;
        EXPECT_EQ(as_gemm(s, *plan, x, w, &bias, &calls), want);
        EXPECT_EQ(calls, calls_expected);
    }
}

TEST(ConvAsGemm, grouped_and_empty_convolutions_keep_the_direct_kernel) {
    Conv1dShape s;
    s.batch = 1, s.in_channels = 8, s.out_channels = 8, s.in_length = 20, s.kernel = 3;
    s.padding = 1, s.groups = 8;
    EXPECT_FALSE(conv_as_gemm(s).has_value());
    s.groups = 1;
    s.batch = 0;
    EXPECT_FALSE(conv_as_gemm(s).has_value());
    s.batch = 1;
    s.in_length = 1, s.padding = 0;  // no output: 1 + 0 - 2 - 1 < 0
    EXPECT_FALSE(conv_as_gemm(s).has_value());
}

// The direct transposed convolution, output by output.
std::vector<float> direct_transpose(const Conv1dShape& s, const std::vector<float>& x,
                                    const std::vector<float>& w, const std::vector<float>* bias) {
    const int out_len = s.transpose_out_length();
    std::vector<float> y(std::size_t(s.batch) * s.out_channels * out_len);
    for (std::size_t i = 0; i < y.size(); ++i)
        bodies::conv_transpose1d_at(i, x.data(), w.data(), bias ? bias->data() : w.data(),
                                    bias ? 1 : 0, y.data(), s.in_channels, s.out_channels,
                                    s.in_length, s.kernel, s.stride, s.dilation, s.padding,
                                    s.groups, out_len);
    return y;
}

// The transposed plan as CUDA runs it: per part of the batch, the GEMM
// into the taps' contributions, then the gather into y.
std::vector<float> transpose_as_gemm(const Conv1dShape& s, const ConvTransposeAsGemm& g,
                                     const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>* bias, int* calls) {
    const int out_len = s.transpose_out_length();
    std::vector<float> y(std::size_t(s.batch) * s.out_channels * out_len, -99.0f);
    std::vector<float> z(g.z_floats_per_item * std::size_t(g.items_per_call), -77.0f);
    *calls = 0;
    for (int first = 0; first < g.batch; first += g.items_per_call) {
        const int items = std::min(g.items_per_call, g.batch - first);
        const float* xs = x.data() + std::size_t(first) * g.x_floats_per_item;
        for (int i = 0; i < items; ++i)
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, g.m, g.n, g.k, 1.0f,
                        xs + i * g.stride_a, int(g.lda), w.data() + i * g.stride_b, int(g.ldb),
                        0.0f, z.data() + i * g.stride_c, int(g.ldc));
        float* ys = y.data() + std::size_t(first) * g.y_floats_per_item;
        for (std::size_t i = 0; i < g.y_floats_per_item * std::size_t(items); ++i)
            bodies::col2im_at(i, z.data(), bias ? bias->data() : w.data(), bias ? 1 : 0, ys,
                              s.out_channels, s.kernel, s.in_length, s.stride, s.dilation,
                              s.padding, out_len);
        ++*calls;
    }
    return y;
}

TEST(ConvAsGemm, transposed_equals_the_direct_transposed_convolution_exactly) {
    for (const Conv1dShape& s : {
             shape(1, 8, 4, 12, 16, 8, 1, 4),  // HiFi-GAN's upsampler: kernel 2 x stride
             shape(3, 6, 5, 9, 4, 2, 1, 1),    // a batch, kernel 4 stride 2
             shape(2, 5, 3, 7, 3, 2, 2, 0),    // dilated, no padding
             shape(2, 4, 6, 5, 5, 3, 1, 2),    // kernel not a multiple of the stride
             shape(1, 3, 2, 1, 6, 3, 1, 1),    // one input sample
         }) {
        SCOPED_TRACE(testing::Message()
                     << "batch " << s.batch << " in " << s.in_channels << " out " << s.out_channels
                     << " len " << s.in_length << " taps " << s.kernel << " stride " << s.stride
                     << " dilation " << s.dilation << " padding " << s.padding);
        const auto x = small_integers(std::size_t(s.batch) * s.in_channels * s.in_length, 7);
        const auto w = small_integers(std::size_t(s.in_channels) * s.out_channels * s.kernel, 8);
        const auto bias = small_integers(std::size_t(s.out_channels), 9);
        const auto plan = conv_transpose_as_gemm(s);
        ASSERT_TRUE(plan.has_value());
        int calls = 0;
        EXPECT_EQ(transpose_as_gemm(s, *plan, x, w, &bias, &calls),
                  direct_transpose(s, x, w, &bias));
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(transpose_as_gemm(s, *plan, x, w, nullptr, &calls),
                  direct_transpose(s, x, w, nullptr));
        // Past the scratch bound: a window per GEMM, the same result.
        const auto parts = conv_transpose_as_gemm(s, plan->z_floats_per_item);
        ASSERT_TRUE(parts.has_value());
        EXPECT_EQ(parts->items_per_call, 1);
        EXPECT_EQ(transpose_as_gemm(s, *parts, x, w, &bias, &calls),
                  direct_transpose(s, x, w, &bias));
        EXPECT_EQ(calls, s.batch);
    }
    Conv1dShape grouped = shape(1, 4, 4, 8, 4, 2, 1, 1);
    grouped.groups = 2;
    EXPECT_FALSE(conv_transpose_as_gemm(grouped).has_value());
}

}  // namespace
}  // namespace etude::gpu
