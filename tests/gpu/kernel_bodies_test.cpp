// The shared kernel bodies (gpu/kernels/kernel_bodies.h) compiled as host
// C++ and called directly, element by element, as a device would. Inputs are
// small integers, so every sum is exact in float whatever its order: any
// difference from the definition is an indexing or bounds error (a missed,
// doubled or out-of-range tap), which is what OpenCL (PoCL in CI) and CUDA
// would execute too.
#include "gpu/kernels/kernel_bodies.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <tuple>
#include <vector>

#include "gpu/kernels/attention_bodies.h"

namespace etude::gpu {
namespace {

std::vector<float> small_integers(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-4, 4);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(d(rng));
    return v;
}

struct Shape {
    int batch, in_ch, out_ch, len, taps, stride, dilation, padding, groups;
};

TEST(KernelBodies, conv1d_body_takes_every_tap_inside_the_signal_once) {
    for (Shape s : {Shape{2, 6, 4, 37, 5, 2, 3, 3, 2}, Shape{1, 8, 8, 20, 7, 1, 1, 3, 8},
                    Shape{1, 3, 5, 16, 3, 1, 1, 0, 1}, Shape{2, 5, 7, 50, 4, 3, 1, 0, 1}}) {
        const int icg = s.in_ch / s.groups, ocg = s.out_ch / s.groups;
        const int out_len = (s.len + 2 * s.padding - s.dilation * (s.taps - 1) - 1) / s.stride + 1;
        const auto x = small_integers(std::size_t(s.batch) * s.in_ch * s.len, 1);
        const auto w = small_integers(std::size_t(s.out_ch) * icg * s.taps, 2);
        const auto bias = small_integers(s.out_ch, 3);
        std::vector<float> y(std::size_t(s.batch) * s.out_ch * out_len);
        for (std::size_t i = 0; i < y.size(); ++i)
            bodies::conv1d_at(i, x.data(), w.data(), bias.data(), 1, y.data(), s.in_ch, s.out_ch,
                              s.len, s.taps, s.stride, s.dilation, s.padding, s.groups, out_len);
        // The definition, as a scatter over the input.
        std::vector<double> want(y.size());
        for (int b = 0; b < s.batch; ++b)
            for (int oc = 0; oc < s.out_ch; ++oc) {
                const int g = oc / ocg;
                for (int t = 0; t < out_len; ++t) {
                    double acc = bias[oc];
                    for (int ic = 0; ic < icg; ++ic)
                        for (int k = 0; k < s.taps; ++k) {
                            const int ti = t * s.stride - s.padding + k * s.dilation;
                            if (ti < 0 || ti >= s.len) continue;
                            acc += double(w[(std::size_t(oc) * icg + ic) * s.taps + k]) *
                                   x[(std::size_t(b) * s.in_ch + g * icg + ic) * s.len + ti];
                        }
                    want[(std::size_t(b) * s.out_ch + oc) * out_len + t] = acc;
                }
            }
        for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "output " << i;
    }
}

TEST(KernelBodies, conv_transpose1d_gather_equals_the_scatter_definition) {
    for (Shape s : {Shape{2, 6, 4, 19, 16, 8, 1, 4, 2}, Shape{2, 8, 6, 50, 5, 3, 2, 1, 2},
                    Shape{1, 2, 3, 11, 3, 2, 3, 2, 1}, Shape{1, 4, 4, 33, 4, 2, 1, 1, 4},
                    Shape{1, 3, 5, 41, 3, 1, 1, 0, 1}}) {
        const int icg = s.in_ch / s.groups, ocg = s.out_ch / s.groups;
        const int out_len = (s.len - 1) * s.stride - 2 * s.padding + s.dilation * (s.taps - 1) + 1;
        const auto x = small_integers(std::size_t(s.batch) * s.in_ch * s.len, 4);
        const auto w = small_integers(std::size_t(s.in_ch) * ocg * s.taps, 5);
        std::vector<float> y(std::size_t(s.batch) * s.out_ch * out_len);
        for (std::size_t i = 0; i < y.size(); ++i)
            bodies::conv_transpose1d_at(i, x.data(), w.data(), nullptr, 0, y.data(), s.in_ch,
                                        s.out_ch, s.len, s.taps, s.stride, s.dilation, s.padding,
                                        s.groups, out_len);
        // The definition: every input sample scatters through every tap.
        std::vector<double> want(y.size(), 0.0);
        for (int b = 0; b < s.batch; ++b)
            for (int ic = 0; ic < s.in_ch; ++ic) {
                const int g = ic / icg;
                for (int o = 0; o < ocg; ++o)
                    for (int ti = 0; ti < s.len; ++ti)
                        for (int k = 0; k < s.taps; ++k) {
                            const int t = ti * s.stride - s.padding + k * s.dilation;
                            if (t < 0 || t >= out_len) continue;
                            want[(std::size_t(b) * s.out_ch + g * ocg + o) * out_len + t] +=
                                double(x[(std::size_t(b) * s.in_ch + ic) * s.len + ti]) *
                                w[(std::size_t(ic) * ocg + o) * s.taps + k];
                        }
            }
        for (std::size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "output " << i;
    }
}

TEST(KernelBodies, overlap_add_sums_exactly_the_frames_covering_each_sample) {
    for (auto [n_fft, hop, n_frames] : std::initializer_list<std::tuple<int, int, int>>{
             {16, 4, 9}, {37, 10, 7}, {16, 20, 4}, {8, 8, 3}}) {
        const auto frames = small_integers(std::size_t(n_fft) * n_frames, 6);
        const auto window = small_integers(n_fft, 7);
        const std::size_t len = std::size_t(n_frames - 1) * hop + n_fft;
        std::vector<float> out(len, 99.0f);
        for (std::size_t t = 0; t < len; ++t)
            bodies::overlap_add_at(t, frames.data(), n_fft, hop, n_frames, window.data(),
                                   out.data());
        std::vector<double> want(len, 0.0);
        for (int f = 0; f < n_frames; ++f)
            for (int i = 0; i < n_fft; ++i)
                want[std::size_t(f) * hop + i] +=
                    double(frames[std::size_t(f) * n_fft + i]) * window[i];
        for (std::size_t t = 0; t < len; ++t) ASSERT_EQ(out[t], want[t]) << "sample " << t;
    }
}

TEST(KernelBodies, element_bodies_follow_their_definitions) {
    EXPECT_EQ(bodies::activation_of(ETUDE_ACT_LEAKY_RELU, -2.0f, 0.1f), 0.1f * -2.0f);
    EXPECT_EQ(bodies::activation_of(ETUDE_ACT_LEAKY_RELU, 3.0f, 0.1f), 3.0f);
    EXPECT_NEAR(bodies::activation_of(ETUDE_ACT_GELU, 1.0f, 0.0f), 0.8413447460685429, 1e-6);
    EXPECT_EQ(bodies::activation_of(ETUDE_ACT_TANH, 0.5f, 0.0f), std::tanh(0.5f));

    // Hermitian edges: imaginary parts of bin 0 and (even n) bin n/2 cleared.
    std::vector<float> spec(2 * 5, 1.0f);  // n = 8: 5 bins
    bodies::hermitian_edges_row(0, 8, spec.data());
    EXPECT_EQ(spec, (std::vector<float>{1, 0, 1, 1, 1, 1, 1, 1, 1, 0}));
    std::vector<float> odd(2 * 4, 1.0f);  // n = 7: 4 bins, no Nyquist bin
    bodies::hermitian_edges_row(0, 7, odd.data());
    EXPECT_EQ(odd, (std::vector<float>{1, 0, 1, 1, 1, 1, 1, 1}));

    // Minimum-phase fold of one row of 6: y0 = x0, 2x below n/2, x at n/2, 0 above.
    const std::vector<float> x = {1, 2, 3, 4, 5, 6};
    std::vector<float> y(6, 99.0f);
    for (std::size_t i = 0; i < 6; ++i) bodies::minimum_phase_fold_at(i, 6, x.data(), y.data());
    EXPECT_EQ(y, (std::vector<float>{1, 4, 6, 4, 0, 0}));

    // WaveNet's gate over 3 items of 2 outputs (x [3][2 * 2]): item i's
    // output j pairs x[4i + j] with x[4i + 2 + j].
    const std::vector<float> g = small_integers(12, 41);
    std::vector<float> gy(6, 99.0f);
    for (std::size_t item = 0; item < 3; ++item)
        for (std::size_t i = 0; i < 2; ++i) bodies::gated_tanh_at(item, i, 2, g.data(), gy.data());
    for (std::size_t item = 0; item < 3; ++item)
        for (std::size_t j = 0; j < 2; ++j)
            EXPECT_FLOAT_EQ(gy[2 * item + j],
                            std::tanh(g[4 * item + j]) / (1.0f + std::exp(-g[4 * item + 2 + j])))
                << "item " << item << ", output " << j;

    // axpby with beta == 0 never reads y.
    const float xs[] = {2.0f};
    float ys[] = {NAN};
    bodies::axpby_at(0, 3.0f, xs, 0.0f, ys);
    EXPECT_EQ(ys[0], 6.0f);
}

// Each element of a strided block lands at its row and column of the
// destination, and nothing outside the block is written: rows narrower
// than both strides, from and to places inside their buffers.
TEST(KernelBodies, copy_rows_moves_exactly_the_strided_block) {
    const int rows = 5, cols = 3;
    const std::size_t src_at = 4, src_stride = 7, dst_at = 2, dst_stride = 4;
    const auto src = small_integers(src_at + rows * src_stride, 11);
    std::vector<float> dst(dst_at + rows * dst_stride + 3, 99.0f);
    std::vector<float> want = dst;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c)
            want[dst_at + r * dst_stride + c] = src[src_at + r * src_stride + c];
    for (etude_index i = 0; i < etude_index(rows) * cols; ++i)
        bodies::copy_rows_at(i, cols, src_at, src_stride, dst_at, dst_stride, src.data(),
                             dst.data());
    EXPECT_EQ(dst, want);
}

// Every element of every item, gathered from its slot and scattered back
// into a copy of the slots, lands where the definition says; an item whose
// index is negative, past the slots or NaN is left alone, and a fractional
// index within them (4.5 of 5) names the slot it truncates to. (The
// integer check after the float one matters on Vulkan, whose compilers may
// assume no NaN; on the host the float test alone already holds.)
TEST(KernelBodies, copy_slot_rows_moves_each_item_between_its_batch_place_and_its_slot) {
    const int items = 6, rows = 3, cols = 4, slots = 5;
    const std::size_t slot_at = 2, slot_floats = 20, slot_stride = 6, batch_at = 1,
                      batch_stride = 5;
    const std::vector<float> index = {3.0f, 0.0f, -1.0f, 5.0f, std::nanf(""), 4.5f};
    const auto slot_values = small_integers(slot_at + slots * slot_floats, 7);
    std::vector<float> batch(batch_at + items * rows * batch_stride, 99.0f);
    std::vector<float> want = batch;
    for (int b = 0; b < items; ++b) {
        const float where = index[std::size_t(b)];
        if (!(where >= 0.0f && where < float(slots))) continue;
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c)
                want[batch_at + (std::size_t(b) * rows + r) * batch_stride + c] =
                    slot_values[slot_at + std::size_t(where) * slot_floats + r * slot_stride + c];
    }
    const etude_index n = etude_index(items) * rows * cols;
    for (etude_index i = 0; i < n; ++i)
        bodies::copy_slot_rows_at(i, rows, cols, index.data(), slots, slot_at, slot_floats,
                                  slot_stride, batch_at, batch_stride, 1, slot_values.data(),
                                  batch.data());
    EXPECT_EQ(batch, want);
    std::vector<float> back(slot_values.size(), 99.0f), want_back = back;
    for (int b = 0; b < items; ++b) {
        const float where = index[std::size_t(b)];
        if (!(where >= 0.0f && where < float(slots))) continue;
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c)
                want_back[slot_at + std::size_t(where) * slot_floats + r * slot_stride + c] =
                    batch[batch_at + (std::size_t(b) * rows + r) * batch_stride + c];
    }
    for (etude_index i = 0; i < n; ++i)
        bodies::copy_slot_rows_at(i, rows, cols, index.data(), slots, slot_at, slot_floats,
                                  slot_stride, batch_at, batch_stride, 0, batch.data(),
                                  back.data());
    EXPECT_EQ(back, want_back);
}

// VITS' relative attention written the way Piper's PyTorch does it: the
// relative logits [i][m] against the embeddings padded to 2*length - 1
// offsets, then moved to absolute positions (offset j - i at m = j - i +
// length - 1); a padded key masked to -1e4. Small integers: exact sums.
TEST(KernelBodies, relative_attention_bodies_equal_piper_s_relative_to_absolute_form) {
    for (auto [batch, heads, length, channels, window] :
         std::initializer_list<std::tuple<int, int, int, int, int>>{
             {1, 1, 1, 3, 4}, {1, 2, 3, 4, 4}, {2, 2, 9, 3, 4}, {3, 3, 7, 2, 1}}) {
        const int width = heads * channels, rel = 2 * window + 1;
        const std::size_t rows = std::size_t(batch) * length;
        const auto q = small_integers(rows * width, 11), k = small_integers(rows * width, 12),
                   v = small_integers(rows * width, 13);
        const auto rk = small_integers(std::size_t(rel) * channels, 14),
                   rv = small_integers(std::size_t(rel) * channels, 15);
        std::vector<float> mask(rows, 1.0f);
        for (int b = 1; b < batch; ++b)
            for (int j = length - b; j < length; ++j) mask[std::size_t(b) * length + j] = 0.0f;
        // The padded embedding: offset o in [-(length-1), length-1] is row
        // o + window of the table when |o| <= window, else zeros.
        const auto embedding = [&](const std::vector<float>& table, int offset, int c) {
            return std::abs(offset) <= window ? table[std::size_t(offset + window) * channels + c]
                                              : 0.0f;
        };
        const std::size_t total = std::size_t(batch) * heads * length * length;
        std::vector<float> scores(total), p(total), y(rows * width);
        for (std::size_t gid = 0; gid < total; ++gid)
            bodies::relative_scores_at(gid, heads, length, channels, window, 0.5f, q.data(),
                                       k.data(), rk.data(), 1, mask.data(), scores.data());
        for (int b = 0; b < batch; ++b)
            for (int h = 0; h < heads; ++h)
                for (int i = 0; i < length; ++i)
                    for (int j = 0; j < length; ++j) {
                        const std::size_t o =
                            ((std::size_t(b) * heads + h) * length + i) * length + j;
                        float want = -1e4f;
                        if (mask[std::size_t(b) * length + j] != 0.0f) {
                            float sum = 0;
                            for (int c = 0; c < channels; ++c) {
                                const float qc =
                                    q[(std::size_t(b) * length + i) * width + h * channels + c];
                                sum += qc *
                                       k[(std::size_t(b) * length + j) * width + h * channels + c];
                                sum += qc * embedding(rk, j - i, c);
                            }
                            want = sum * 0.5f;
                        }
                        ASSERT_EQ(scores[o], want) << b << " " << h << " " << i << " " << j;
                        p[o] = float(int(o % 5) - 2);  // small integers for the values
                    }
        for (std::size_t gid = 0; gid < y.size(); ++gid)
            bodies::relative_values_at(gid, heads, length, channels, window, p.data(), v.data(),
                                       rv.data(), y.data());
        for (int b = 0; b < batch; ++b)
            for (int i = 0; i < length; ++i)
                for (int h = 0; h < heads; ++h)
                    for (int c = 0; c < channels; ++c) {
                        float want = 0;
                        for (int j = 0; j < length; ++j) {
                            const float pj =
                                p[((std::size_t(b) * heads + h) * length + i) * length + j];
                            want +=
                                pj * v[(std::size_t(b) * length + j) * width + h * channels + c];
                            want += pj * embedding(rv, j - i, c);
                        }
                        ASSERT_EQ(y[(std::size_t(b) * length + i) * width + h * channels + c], want)
                            << b << " " << i << " " << h << " " << c;
                    }
    }
}

}  // namespace
}  // namespace etude::gpu
