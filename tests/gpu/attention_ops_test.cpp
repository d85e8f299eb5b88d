// The attention ops of gpu::Backend (softmax_rows, relative_attention_scores,
// relative_attention_values: gpu/kernels/attention_bodies.h) and the
// broadcast_multiply their masks use (kernel_bodies.h) on every device
// the registry opens, against their definitions computed in double on the
// host.
//
// Tolerance, element by element, from float rounding alone: an output that
// sums n float products, in any order, is within gamma(n + 2) * S of the
// exact value, where S is the sum of the products' magnitudes, gamma(m) =
// m u / (1 - m u) and u = 2^-24 (each product rounds once, the sum at most n
// times, the scale once: Higham, "Accuracy and Stability of Numerical
// Algorithms", 3.1). A softmax output is within (|x - top| + cols + 8) u of
// its value, relative: the subtraction rounds once and exp's argument moves
// by that much, exp itself is within 4 ulp (OpenCL's bound is 3, the Vulkan
// shaders' device_math.h and libmvec are within it), and the sum and the
// division add cols + 2. A wrong index or a missed term is off by about a
// whole term, far outside these.
#include "gpu/backend_parity.h"

namespace etude::gpu {
namespace {

class AttentionOps : public BackendParity {
  protected:
    // |got - want| <= bound for every element, on the device and on the CPU
    // reference.
    void expect_within(const std::string& what, const Pair& p, const std::vector<double>& want,
                       const std::vector<double>& bound) {
        const auto check = [&](const char* who, const std::vector<float>& got) {
            double worst = 0;  // the largest error as a share of its bound
            std::size_t bad = 0, first_bad = 0;
            for (std::size_t i = 0; i < want.size(); ++i) {
                const double err = std::fabs(double(got[i]) - want[i]);
                const double share = bound[i] > 0 ? err / bound[i] : (err > 0 ? 1e30 : 0);
                if (!(share <= 1.0) && bad++ == 0) first_bad = i;
                if (!(share <= worst)) worst = share;
            }
            std::printf("[ parity ] %-6s %-58s error at most %.2f of its bound (%s)\n", label(),
                        what.c_str(), worst, who);
            EXPECT_EQ(bad, 0u) << what << " (" << who << "): element " << first_bad << " is "
                               << got[first_bad] << ", want " << want[first_bad] << " within "
                               << bound[first_bad];
        };
        check(label(), dev_data(p));
        check("cpu reference", ref_data(p));
    }
};

constexpr double kUnit = 1.0 / (1 << 24);

double gamma_of(int terms) {
    return terms * kUnit / (1 - terms * kUnit);
}

struct AttentionShape {
    int batch, heads, length, channels, window;
};

std::string shape_name(const char* op, const AttentionShape& s) {
    return std::string(op) + " b=" + std::to_string(s.batch) + " heads=" + std::to_string(s.heads) +
           " len=" + std::to_string(s.length) + " ch=" + std::to_string(s.channels) +
           " win=" + std::to_string(s.window);
}

// One phoneme; shorter and longer than the window; no band at all; Piper's
// medium voice (2 heads of 96, window 4); batches of sentences padded to
// one length (sentence b has length - b valid positions: a key mask).
const AttentionShape kShapes[] = {{1, 1, 1, 4, 4},   {1, 2, 3, 5, 4},    {1, 3, 9, 8, 0},
                                  {1, 2, 37, 96, 4}, {1, 1, 70, 16, 10}, {1, 4, 12, 3, 1},
                                  {3, 2, 9, 8, 4},   {4, 2, 37, 96, 4}};

// Sentence b's valid positions in a batch (all of them alone).
int valid_length(const AttentionShape& s, int b) {
    return s.batch == 1 ? s.length : s.length - b;
}

TEST_P(AttentionOps, softmax_rows_is_exp_over_its_sum_in_and_out_of_place) {
    for (auto [rows, cols] : std::initializer_list<P2>{{1, 1}, {3, 7}, {64, 140}, {5, 301}}) {
        const auto v = random_vector(std::size_t(rows) * cols, 900 + cols, -4.0f, 4.0f);
        std::vector<double> want(v.size()), bound(v.size());
        for (int r = 0; r < rows; ++r) {
            const float* x = v.data() + std::size_t(r) * cols;
            const double top = *std::max_element(x, x + cols);
            double sum = 0;
            for (int c = 0; c < cols; ++c) sum += std::exp(x[c] - top);
            for (int c = 0; c < cols; ++c) {
                const std::size_t i = std::size_t(r) * cols + c;
                want[i] = std::exp(x[c] - top) / sum;
                bound[i] = want[i] * (std::fabs(x[c] - top) + cols + 8) * kUnit;
            }
        }
        const std::string what =
            "softmax_rows " + std::to_string(rows) + "x" + std::to_string(cols);
        const auto x = upload(v);
        auto y = output(v.size());
        ref_.softmax_rows(*rq_, rows, cols, x.ref, y.ref);
        dev_->softmax_rows(*dq_, rows, cols, x.dev, y.dev);
        expect_within(what, y, want, bound);
        auto in_place = upload(v);
        ref_.softmax_rows(*rq_, rows, cols, in_place.ref, in_place.ref);
        dev_->softmax_rows(*dq_, rows, cols, in_place.dev, in_place.dev);
        expect_within(what + " in place", in_place, want, bound);
    }
}

TEST_P(AttentionOps, relative_attention_scores_add_the_relative_keys_on_the_band) {
    for (const auto& s : kShapes) {
        const int width = s.heads * s.channels, rel = 2 * s.window + 1, n = s.length;
        const std::size_t rows = std::size_t(s.batch) * n;
        const auto qv = random_vector(rows * width, 910 + n);
        const auto kv = random_vector(rows * width, 911 + n);
        const auto rk = random_vector(std::size_t(rel) * s.channels, 912 + n);
        std::vector<float> mask(rows);
        for (int b = 0; b < s.batch; ++b)
            for (int j = 0; j < n; ++j) mask[std::size_t(b) * n + j] = j < valid_length(s, b);
        const float scale = 1.0f / std::sqrt(float(s.channels));
        const std::size_t total = std::size_t(s.batch) * s.heads * n * n;
        std::vector<double> want(total), bound(total);
        for (int b = 0; b < s.batch; ++b)
            for (int h = 0; h < s.heads; ++h)
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < n; ++j) {
                        const std::size_t o = ((std::size_t(b) * s.heads + h) * n + i) * n + j;
                        if (j >= valid_length(s, b)) {
                            want[o] = -1e4;  // a padded key
                            continue;
                        }
                        const float* qi =
                            qv.data() + (std::size_t(b) * n + i) * width + h * s.channels;
                        const float* kj =
                            kv.data() + (std::size_t(b) * n + j) * width + h * s.channels;
                        const int r = j - i + s.window;
                        const bool on_band = r >= 0 && r < rel;
                        double sum = 0, magnitude = 0;
                        for (int c = 0; c < s.channels; ++c) {
                            sum += double(qi[c]) * kj[c];
                            magnitude += std::fabs(double(qi[c]) * kj[c]);
                            if (on_band) {
                                const double e = rk[std::size_t(r) * s.channels + c];
                                sum += qi[c] * e;
                                magnitude += std::fabs(qi[c] * e);
                            }
                        }
                        const int terms = on_band ? 2 * s.channels : s.channels;
                        want[o] = sum * scale;
                        bound[o] = gamma_of(terms + 2) * magnitude * scale;
                    }
        const auto q = upload(qv), k = upload(kv), rel_k = upload(rk), m = upload(mask);
        const DeviceBuffer none;
        auto scores = output(total);
        const bool masked = s.batch > 1;
        ref_.relative_attention_scores(*rq_, s.batch, s.heads, n, s.channels, s.window, scale,
                                       q.ref, k.ref, rel_k.ref, masked ? m.ref : none, scores.ref);
        dev_->relative_attention_scores(*dq_, s.batch, s.heads, n, s.channels, s.window, scale,
                                        q.dev, k.dev, rel_k.dev, masked ? m.dev : none, scores.dev);
        expect_within(shape_name("relative_attention_scores", s), scores, want, bound);
    }
}

TEST_P(AttentionOps, relative_attention_values_add_the_relative_values_on_the_band) {
    for (const auto& s : kShapes) {
        const int width = s.heads * s.channels, rel = 2 * s.window + 1, n = s.length;
        const std::size_t rows = std::size_t(s.batch) * n;
        // Probabilities: positive rows that sum to about 1.
        auto pv =
            random_vector(std::size_t(s.batch) * s.heads * n * n, 920 + n, 0.0f, 2.0f / float(n));
        const auto vv = random_vector(rows * width, 921 + n);
        const auto rv = random_vector(std::size_t(rel) * s.channels, 922 + n);
        std::vector<double> want(rows * width), bound(want.size());
        for (int b = 0; b < s.batch; ++b)
            for (int i = 0; i < n; ++i)
                for (int h = 0; h < s.heads; ++h)
                    for (int c = 0; c < s.channels; ++c) {
                        const float* pr = pv.data() + ((std::size_t(b) * s.heads + h) * n + i) * n;
                        const float* vb = vv.data() + std::size_t(b) * n * width;
                        double sum = 0, magnitude = 0;
                        int terms = n;
                        for (int j = 0; j < n; ++j) {
                            const double t =
                                double(pr[j]) * vb[std::size_t(j) * width + h * s.channels + c];
                            sum += t;
                            magnitude += std::fabs(t);
                        }
                        for (int r = 0; r < rel; ++r) {
                            const int j = i + r - s.window;
                            if (j < 0 || j >= n) continue;
                            const double t = double(pr[j]) * rv[std::size_t(r) * s.channels + c];
                            sum += t;
                            magnitude += std::fabs(t);
                            ++terms;
                        }
                        const std::size_t o = (std::size_t(b) * n + i) * width + h * s.channels + c;
                        want[o] = sum;
                        bound[o] = gamma_of(terms + 1) * magnitude;
                    }
        const auto p = upload(pv), v = upload(vv), rel_v = upload(rv);
        auto y = output(want.size());
        ref_.relative_attention_values(*rq_, s.batch, s.heads, n, s.channels, s.window, p.ref,
                                       v.ref, rel_v.ref, y.ref);
        dev_->relative_attention_values(*dq_, s.batch, s.heads, n, s.channels, s.window, p.dev,
                                        v.dev, rel_v.dev, y.dev);
        expect_within(shape_name("relative_attention_values", s), y, want, bound);
    }
}

// Exact: one product per element.
TEST_P(AttentionOps, broadcast_multiply_scales_rows_and_columns) {
    for (auto [rows, cols] : std::initializer_list<P2>{{1, 1}, {7, 33}, {140, 192}}) {
        const auto v = random_vector(std::size_t(rows) * cols, 940 + cols);
        for (bool per_row : {true, false}) {
            const auto f = random_vector(per_row ? rows : cols, 941 + rows);
            std::vector<double> want(v.size()), bound(v.size(), 0.0);
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c) {
                    const std::size_t i = std::size_t(r) * cols + c;
                    want[i] = v[i] * f[per_row ? r : c];
                    bound[i] = std::fabs(want[i]) * kUnit;
                }
            auto y = upload(v);
            const auto factors = upload(f);
            ref_.broadcast_multiply(*rq_, rows, cols, factors.ref, per_row, y.ref);
            dev_->broadcast_multiply(*dq_, rows, cols, factors.dev, per_row, y.dev);
            expect_within("broadcast_multiply " + std::to_string(rows) + "x" +
                              std::to_string(cols) + (per_row ? " per row" : " per column"),
                          y, want, bound);
        }
    }
}

// Checked once in gpu::Backend, for every backend, before anything is queued.
TEST_P(AttentionOps, bad_attention_arguments_are_refused_before_anything_runs) {
    auto a = upload(random_vector(64, 930));
    auto b = output(64);
    EXPECT_THROW(dev_->softmax_rows(*dq_, 9, 8, a.dev, b.dev), std::invalid_argument);  // 72 > 64
    // 2 heads x 4 channels x 4 positions = 32 floats each; scores 2 x 4 x 4.
    const DeviceBuffer none;
    const auto scores = [&](int batch, int heads, int length, int channels, int window,
                            const DeviceBuffer& keys, const DeviceBuffer& mask) {
        dev_->relative_attention_scores(*dq_, batch, heads, length, channels, window, 1.0f, a.dev,
                                        keys, a.dev, mask, b.dev);
    };
    EXPECT_THROW(scores(1, 0, 4, 4, 1, a.dev, none), std::invalid_argument);   // no heads
    EXPECT_THROW(scores(1, 2, 4, 4, -1, a.dev, none), std::invalid_argument);  // negative window
    EXPECT_THROW(scores(-1, 2, 4, 4, 1, a.dev, none), std::invalid_argument);  // negative batch
    // rel_k needs 17 x 4 = 68 floats.
    EXPECT_THROW(scores(1, 2, 4, 4, 8, a.dev, none), std::invalid_argument);
    EXPECT_THROW(scores(1, 2, 6, 4, 1, a.dev, none), std::invalid_argument);   // scores need 72
    EXPECT_THROW(scores(3, 2, 4, 4, 1, a.dev, none), std::invalid_argument);   // q needs 96
    EXPECT_THROW(scores(1, 2, 4, 4, 1, b.dev, none), std::invalid_argument);   // keys are scores
    EXPECT_THROW(scores(1, 2, 4, 4, 1, a.dev, b.dev), std::invalid_argument);  // mask is scores
    const auto short_mask = upload(random_vector(3, 931));
    EXPECT_THROW(scores(1, 2, 4, 4, 1, a.dev, short_mask.dev), std::invalid_argument);
    EXPECT_THROW(dev_->relative_attention_values(*dq_, 1, 2, 4, 4, 1, a.dev, a.dev, a.dev, a.dev),
                 std::invalid_argument);  // p and y the same buffer
    EXPECT_THROW(dev_->relative_attention_values(*dq_, 1, 2, 4, 0, 1, a.dev, a.dev, a.dev, b.dev),
                 std::invalid_argument);  // no channels
    EXPECT_THROW(dev_->broadcast_multiply(*dq_, 8, 8, b.dev, true, b.dev),
                 std::invalid_argument);  // factors and y the same buffer
    EXPECT_THROW(dev_->broadcast_multiply(*dq_, 8, 9, a.dev, false, b.dev),
                 std::invalid_argument);  // y holds 64, needs 72
    dev_->synchronize(*dq_);
    expect_equal_to("b after refused calls", b, std::vector<float>(64, 12345.0f), 0.0);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, AttentionOps, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace etude::gpu
