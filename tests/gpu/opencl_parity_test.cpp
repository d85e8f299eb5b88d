// The OpenCL backend against the CPU reference: every op on the same random
// inputs (fixed seeds) through both, compared by the largest error relative
// to the largest magnitude of the reference output. Tolerances are per op:
//   1e-6  element-wise and layout ops (fill, activations, axpby, transpose,
//         add_bias, polar_spectrum, framing, overlap-add, complex ops,
//         minimum-phase fold): within the OpenCL spec's ULP bounds for
//         exp/sin/cos/tanh/erf on any device;
//   1e-5  reductions whose summation order differs from the reference
//         (gemm, conv1d, conv_transpose1d, layer_norm, rfft, irfft, and
//         the irfft(rfft(x)) round trip).
// Each comparison prints the error it saw, so drifts show before they fail.
// Also: fault injection, out-of-memory, pinned memory, timings, threads.
//
// Without an OpenCL platform (no ICD installed) every test skips, naming why.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/opencl/opencl_backend.h"
#include "gpu/opencl/opencl_devices.h"

namespace etude::gpu {
namespace {

constexpr double kElementwiseTol = 1e-6;
constexpr double kReductionTol = 1e-5;

// One CPU backend and OpenCL device 0 for the whole program: opening the
// device compiles the kernels and every FFT plan is baked per device, both
// slow on PoCL, so tests share them.
struct Devices {
    std::unique_ptr<CpuBackend> cpu;
    std::unique_ptr<Backend> ocl;
    std::string skip_reason;
    std::string open_error;
};

Devices& devices() {
    static Devices d = [] {
        Devices out;
        out.cpu = std::make_unique<CpuBackend>();
        std::vector<std::string> notes;
        const auto list = list_opencl_devices(notes);
        if (list.empty()) {
            out.skip_reason = "no OpenCL device:";
            for (const auto& n : notes) out.skip_reason += " " + n;
            return out;
        }
        try {
            out.ocl = open_opencl_device(0);
        } catch (const std::exception& e) {
            // Reported by every test (a failure, not a skip): a device is
            // there but unusable.
            out.open_error = e.what();
            return out;
        }
        std::printf("[ opencl ] device 0: %s (%s; %s)\n", list[0].name.c_str(),
                    list[0].platform.c_str(), list[0].driver.c_str());
        return out;
    }();
    return d;
}

// Releases the device (and its clFFT plans) before static destruction.
class ReleaseDevices : public ::testing::Environment {
  public:
    void TearDown() override { devices().ocl.reset(); }
};
[[maybe_unused]] const auto* const kReleaseDevices =
    ::testing::AddGlobalTestEnvironment(new ReleaseDevices);

std::vector<float> random_vector(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// max |a - ref| / max |ref| (absolute when the reference is all zeros).
double relative_error(const std::vector<float>& ref, const std::vector<float>& got) {
    double max_ref = 0, max_err = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(ref[i])));
        const double e = std::fabs(static_cast<double>(ref[i]) - got[i]);
        max_err = std::max(max_err, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    }
    return max_ref > 0 ? max_err / max_ref : max_err;
}

class OpenClParity : public ::testing::Test {
  protected:
    // The same data on both backends.
    struct Pair {
        DeviceBuffer cpu, ocl;
        std::size_t n = 0;
    };

    void SetUp() override {
        auto& d = devices();
        if (!d.open_error.empty()) FAIL() << "open_opencl_device(0): " << d.open_error;
        if (!d.ocl) GTEST_SKIP() << d.skip_reason;
        cpu_ = d.cpu.get();
        ocl_ = d.ocl.get();
        ocl_->reset_health();
        ocl_->inject_fault({});
        cq_ = cpu_->create_queue();
        oq_ = ocl_->create_queue();
    }
    void TearDown() override {
        if (ocl_) {
            EXPECT_EQ(ocl_->health(), Health::Ok) << ocl_->last_error();
        }
    }

    Pair upload(const std::vector<float>& v) {
        Pair p{cpu_->allocate(v.size(), "test"), ocl_->allocate(v.size(), "test"), v.size()};
        cpu_->copy_to_device(*cq_, p.cpu, 0, v.data(), v.size());
        ocl_->copy_to_device(*oq_, p.ocl, 0, v.data(), v.size());
        ocl_->synchronize(*oq_);
        return p;
    }
    // Outputs start as a sentinel so an element the device never writes
    // shows up as a huge error.
    Pair output(std::size_t n) { return upload(std::vector<float>(n, 12345.0f)); }

    std::vector<float> cpu_data(const Pair& p) {
        std::vector<float> v(p.n);
        cpu_->copy_to_host(*cq_, v.data(), p.cpu, 0, p.n);
        return v;
    }
    std::vector<float> ocl_data(const Pair& p) {
        std::vector<float> v(p.n);
        ocl_->copy_to_host(*oq_, v.data(), p.ocl, 0, p.n);
        ocl_->synchronize(*oq_);
        return v;
    }

    void expect_close(const std::string& what, const Pair& p, double tol) {
        const double err = relative_error(cpu_data(p), ocl_data(p));
        std::printf("[ parity ] %-58s max rel err %.2e (tol %.0e)\n", what.c_str(), err, tol);
        EXPECT_LE(err, tol) << what;
    }
    // Both backends against values computed on the host from the definition.
    void expect_both_equal(const std::string& what, const Pair& p, const std::vector<float>& want,
                           double tol) {
        const double cpu_err = relative_error(want, cpu_data(p));
        const double ocl_err = relative_error(want, ocl_data(p));
        std::printf("[ parity ] %-58s vs expected: cpu %.2e, opencl %.2e (tol %.0e)\n",
                    what.c_str(), cpu_err, ocl_err, tol);
        EXPECT_LE(cpu_err, tol) << what << " (cpu)";
        EXPECT_LE(ocl_err, tol) << what << " (opencl)";
    }

    CpuBackend* cpu_ = nullptr;
    Backend* ocl_ = nullptr;
    std::unique_ptr<Queue> cq_, oq_;
};

TEST_F(OpenClParity, DeviceIsListedWithItsCapabilities) {
    std::vector<std::string> notes;
    const auto list = list_opencl_devices(notes);
    ASSERT_FALSE(list.empty());
    EXPECT_EQ(list[0].kind, BackendKind::OpenCl);
    EXPECT_EQ(list[0].index, 0);
    EXPECT_FALSE(list[0].name.empty());
    EXPECT_GT(list[0].global_memory, 0u);
    EXPECT_GT(list[0].compute_units, 0);
    const auto& caps = list[0].capabilities;
    EXPECT_NE(std::find(caps.begin(), caps.end(), "fft"), caps.end());
    EXPECT_NE(std::find(caps.begin(), caps.end(), "gemm"), caps.end());
    EXPECT_EQ(ocl_->info().name, list[0].name);
    EXPECT_THROW(open_opencl_device(static_cast<int>(list.size())), DeviceError);
}

TEST_F(OpenClParity, Fill) {
    for (std::size_t n : {1u, 63u, 1000u}) {
        auto y = output(n);
        cpu_->fill(*cq_, y.cpu, -2.5f, n);
        ocl_->fill(*oq_, y.ocl, -2.5f, n);
        expect_close("fill n=" + std::to_string(n), y, kElementwiseTol);
    }
}

TEST_F(OpenClParity, Activations) {
    const Activation all[] = {Activation::LeakyRelu, Activation::Gelu, Activation::Tanh,
                              Activation::Exp,       Activation::Sin,  Activation::Cos};
    for (std::size_t n : {1u, 17u, 1000u, 4099u})
        for (Activation f : all) {
            const auto x = upload(random_vector(n, 7 + static_cast<unsigned>(n), -4.0f, 4.0f));
            auto y = output(n);
            cpu_->activation(*cq_, f, x.cpu, y.cpu, n, 0.1f);
            ocl_->activation(*oq_, f, x.ocl, y.ocl, n, 0.1f);
            expect_close(std::string(to_string(f)) + " n=" + std::to_string(n), y, kElementwiseTol);
        }
}

TEST_F(OpenClParity, ActivationInPlace) {
    auto x = upload(random_vector(333, 3, -4.0f, 4.0f));
    cpu_->activation(*cq_, Activation::Gelu, x.cpu, x.cpu, x.n, 0.0f);
    ocl_->activation(*oq_, Activation::Gelu, x.ocl, x.ocl, x.n, 0.0f);
    expect_close("gelu in place n=333", x, kElementwiseTol);
}

TEST_F(OpenClParity, GemmAllTransposesAndPaddedStrides) {
    struct Size {
        int m, n, k;
    };
    const Size sizes[] = {{1, 1, 1}, {17, 33, 9}, {64, 48, 80}, {100, 37, 129}};
    unsigned seed = 100;
    for (const auto& sz : sizes)
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb)
                for (int pad : {0, 3}) {
                    // Stored shapes: A is m x k (k x m when transposed), B is
                    // k x n (n x k), each row padded by `pad` unused floats.
                    const int a_rows = ta ? sz.k : sz.m, a_cols = ta ? sz.m : sz.k;
                    const int b_rows = tb ? sz.n : sz.k, b_cols = tb ? sz.k : sz.n;
                    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = sz.n + pad;
                    const auto a = upload(random_vector(std::size_t(a_rows) * lda, ++seed));
                    const auto b = upload(random_vector(std::size_t(b_rows) * ldb, ++seed));
                    for (float beta : {0.0f, 0.5f}) {
                        auto c = upload(random_vector(std::size_t(sz.m) * ldc, ++seed));
                        cpu_->gemm(*cq_, ta, tb, sz.m, sz.n, sz.k, 0.75f, a.cpu, lda, b.cpu, ldb,
                                   beta, c.cpu, ldc);
                        ocl_->gemm(*oq_, ta, tb, sz.m, sz.n, sz.k, 0.75f, a.ocl, lda, b.ocl, ldb,
                                   beta, c.ocl, ldc);
                        char what[128];
                        std::snprintf(what, sizeof what, "gemm %s%s m=%d n=%d k=%d pad=%d beta=%g",
                                      ta ? "T" : "N", tb ? "T" : "N", sz.m, sz.n, sz.k, pad, beta);
                        // The whole of C, padding included: it must stay untouched.
                        expect_close(what, c, kReductionTol);
                    }
                }
}

std::string describe(const char* op, const Conv1dShape& s, bool bias) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s b=%d %d->%d len=%d k=%d s=%d d=%d p=%d g=%d%s", op, s.batch,
                  s.in_channels, s.out_channels, s.in_length, s.kernel, s.stride, s.dilation,
                  s.padding, s.groups, bias ? " +bias" : "");
    return buf;
}

TEST_F(OpenClParity, Conv1d) {
    std::vector<Conv1dShape> shapes;
    for (int stride : {1, 2})
        for (int dilation : {1, 3})
            for (int groups : {1, 2}) {
                Conv1dShape s;
                s.batch = 2;
                s.in_channels = 6;
                s.out_channels = 4;
                s.in_length = 37;
                s.kernel = 5;
                s.stride = stride;
                s.dilation = dilation;
                s.padding = 3;
                s.groups = groups;
                shapes.push_back(s);
            }
    Conv1dShape depthwise;  // groups == channels
    depthwise.batch = 1;
    depthwise.in_channels = depthwise.out_channels = depthwise.groups = 8;
    depthwise.in_length = 101;
    depthwise.kernel = 7;
    depthwise.padding = 3;
    shapes.push_back(depthwise);
    Conv1dShape unpadded;
    unpadded.batch = 1;
    unpadded.in_channels = 3;
    unpadded.out_channels = 5;
    unpadded.in_length = 16;
    unpadded.kernel = 3;
    shapes.push_back(unpadded);

    unsigned seed = 200;
    for (const auto& s : shapes)
        for (bool with_bias : {false, true}) {
            const int icg = s.in_channels / s.groups;
            const auto x =
                upload(random_vector(std::size_t(s.batch) * s.in_channels * s.in_length, ++seed));
            const auto w =
                upload(random_vector(std::size_t(s.out_channels) * icg * s.kernel, ++seed));
            const auto bias = with_bias ? upload(random_vector(s.out_channels, ++seed)) : Pair{};
            auto y = output(std::size_t(s.batch) * s.out_channels * s.conv_out_length());
            cpu_->conv1d(*cq_, s, x.cpu, w.cpu, bias.cpu, y.cpu);
            ocl_->conv1d(*oq_, s, x.ocl, w.ocl, bias.ocl, y.ocl);
            expect_close(describe("conv1d", s, with_bias), y, kReductionTol);
        }
}

TEST_F(OpenClParity, ConvTranspose1d) {
    struct Case {
        int stride, kernel, padding;
    };
    const Case cases[] = {{8, 16, 4}, {2, 4, 1}, {3, 5, 0}};
    unsigned seed = 300;
    for (const auto& c : cases)
        for (int groups : {1, 2})
            for (bool with_bias : {false, true}) {
                Conv1dShape s;
                s.batch = 2;
                s.in_channels = 6;
                s.out_channels = 4;
                s.in_length = 19;
                s.kernel = c.kernel;
                s.stride = c.stride;
                s.padding = c.padding;
                s.groups = groups;
                const int ocg = s.out_channels / s.groups;
                const auto x = upload(
                    random_vector(std::size_t(s.batch) * s.in_channels * s.in_length, ++seed));
                const auto w =
                    upload(random_vector(std::size_t(s.in_channels) * ocg * s.kernel, ++seed));
                const auto bias =
                    with_bias ? upload(random_vector(s.out_channels, ++seed)) : Pair{};
                auto y = output(std::size_t(s.batch) * s.out_channels * s.transpose_out_length());
                cpu_->conv_transpose1d(*cq_, s, x.cpu, w.cpu, bias.cpu, y.cpu);
                ocl_->conv_transpose1d(*oq_, s, x.ocl, w.ocl, bias.ocl, y.ocl);
                expect_close(describe("conv_transpose1d", s, with_bias), y, kReductionTol);
            }
    // Dilation too, which the vocoder's upsamplers do not use.
    Conv1dShape s;
    s.in_channels = 2;
    s.out_channels = 3;
    s.in_length = 11;
    s.kernel = 3;
    s.stride = 2;
    s.dilation = 3;
    s.padding = 2;
    const auto x = upload(random_vector(std::size_t(s.in_channels) * s.in_length, 399));
    const auto w =
        upload(random_vector(std::size_t(s.in_channels) * s.out_channels * s.kernel, 398));
    auto y = output(std::size_t(s.out_channels) * s.transpose_out_length());
    cpu_->conv_transpose1d(*cq_, s, x.cpu, w.cpu, DeviceBuffer{}, y.cpu);
    ocl_->conv_transpose1d(*oq_, s, x.ocl, w.ocl, DeviceBuffer{}, y.ocl);
    expect_close(describe("conv_transpose1d", s, false), y, kReductionTol);
}

TEST_F(OpenClParity, LayerNorm) {
    for (int cols : {384, 7})
        for (int rows : {1, 33}) {
            // An offset mean makes the centring matter.
            const auto x = upload(random_vector(std::size_t(rows) * cols, 500 + cols, 2.0f, 4.0f));
            const auto gamma = upload(random_vector(cols, 501, 0.5f, 1.5f));
            const auto beta = upload(random_vector(cols, 502));
            auto y = output(std::size_t(rows) * cols);
            cpu_->layer_norm(*cq_, rows, cols, 1e-5f, x.cpu, gamma.cpu, beta.cpu, y.cpu);
            ocl_->layer_norm(*oq_, rows, cols, 1e-5f, x.ocl, gamma.ocl, beta.ocl, y.ocl);
            expect_close(
                "layer_norm rows=" + std::to_string(rows) + " cols=" + std::to_string(cols), y,
                kReductionTol);
        }
}

TEST_F(OpenClParity, RfftIrfftAndRoundTrip) {
    auto* cl = dynamic_cast<OpenClBackend*>(ocl_);
    ASSERT_NE(cl, nullptr);
    for (int n : {256, 512, 1024})
        for (int batch : {1, 37}) {
            const auto t0 = std::chrono::steady_clock::now();
            cl->prewarm_fft(n, batch);
            const double bake_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
            std::printf("[ opencl ] clFFT bake (forward + inverse) n=%d batch=%d: %.0f ms\n", n,
                        batch, bake_ms);

            const std::size_t bins = std::size_t(n / 2 + 1) * 2;  // floats per spectrum
            const std::string shape = " n=" + std::to_string(n) + " batch=" + std::to_string(batch);
            const auto signal = random_vector(std::size_t(n) * batch, 600 + n + batch);
            const auto x = upload(signal);
            auto spec = output(bins * batch);
            cpu_->rfft(*cq_, n, batch, x.cpu, spec.cpu);
            ocl_->rfft(*oq_, n, batch, x.ocl, spec.ocl);
            expect_close("rfft" + shape, spec, kReductionTol);
            expect_close("rfft leaves its input intact" + shape, x, kElementwiseTol);

            // The inverse from the same (Hermitian) spectrum on both sides.
            const auto ref_spec = cpu_data(spec);
            const auto s = upload(ref_spec);
            auto back = output(std::size_t(n) * batch);
            cpu_->irfft(*cq_, n, batch, s.cpu, back.cpu);
            ocl_->irfft(*oq_, n, batch, s.ocl, back.ocl);
            expect_close("irfft" + shape, back, kReductionTol);
            expect_close("irfft leaves its input intact" + shape, s, kElementwiseTol);

            // A spectrum whose DC and Nyquist bins have imaginary parts (as a
            // network's output may): both backends ignore them.
            auto raw = ref_spec;
            for (int b = 0; b < batch; ++b) {
                raw[b * bins + 1] = 0.5f;
                if (n % 2 == 0) raw[b * bins + bins - 1] = -0.75f;
            }
            const auto r = upload(raw);
            auto raw_back = output(std::size_t(n) * batch);
            cpu_->irfft(*cq_, n, batch, r.cpu, raw_back.cpu);
            ocl_->irfft(*oq_, n, batch, r.ocl, raw_back.ocl);
            expect_close("irfft ignores imag(DC), imag(Nyquist)" + shape, raw_back, kReductionTol);
            EXPECT_LE(relative_error(cpu_data(back), cpu_data(raw_back)), kReductionTol)
                << "the CPU reference ignores them too";

            // irfft(rfft(x)) == x on the device alone.
            auto round = output(std::size_t(n) * batch);
            ocl_->irfft(*oq_, n, batch, spec.ocl, round.ocl);
            const double err = relative_error(signal, ocl_data(round));
            std::printf("[ parity ] %-58s max rel err %.2e (tol %.0e)\n",
                        ("irfft(rfft(x)) == x" + shape).c_str(), err, kReductionTol);
            EXPECT_LE(err, kReductionTol);
        }
}

TEST_F(OpenClParity, Axpby) {
    for (std::size_t n : {1u, 63u, 1000u}) {
        const auto xv = random_vector(n, 1600 + static_cast<unsigned>(n));
        const auto yv = random_vector(n, 1601 + static_cast<unsigned>(n));
        const auto x = upload(xv);
        auto y = upload(yv);
        cpu_->axpby(*cq_, n, 1.5f, x.cpu, -0.25f, y.cpu);
        ocl_->axpby(*oq_, n, 1.5f, x.ocl, -0.25f, y.ocl);
        expect_close("axpby alpha=1.5 beta=-0.25 n=" + std::to_string(n), y, kElementwiseTol);

        // beta == 0 overwrites: whatever y held (NaN here) must not leak through.
        auto z = upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
        cpu_->axpby(*cq_, n, -2.0f, x.cpu, 0.0f, z.cpu);
        ocl_->axpby(*oq_, n, -2.0f, x.ocl, 0.0f, z.ocl);
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i) want[i] = -2.0f * xv[i];
        expect_both_equal("axpby beta=0 over NaN n=" + std::to_string(n), z, want, 0.0);

        // In place: y = 0.5 y + 2 y.
        auto w = upload(xv);
        cpu_->axpby(*cq_, n, 0.5f, w.cpu, 2.0f, w.cpu);
        ocl_->axpby(*oq_, n, 0.5f, w.ocl, 2.0f, w.ocl);
        expect_close("axpby in place n=" + std::to_string(n), w, kElementwiseTol);
    }
}

// Row blocks between buffers with their own offsets and strides (the
// streaming vocoders keep each channel's tail this way); elements outside
// the block keep their sentinel.
TEST_F(OpenClParity, CopyRows) {
    struct Case {
        int rows, cols;
        std::size_t src_offset, src_stride, dst_offset, dst_stride;
    };
    for (Case c : {Case{1, 1, 0, 1, 0, 1}, Case{3, 5, 2, 9, 1, 7}, Case{64, 12, 100, 40, 0, 12},
                   Case{5, 33, 7, 33, 3, 50},
                   // Large enough that the CPU backend splits the rows among its workers.
                   Case{300, 257, 11, 300, 5, 260}}) {
        const std::size_t src_n = c.src_offset + (c.rows - 1) * c.src_stride + c.cols + 3;
        const std::size_t dst_n = c.dst_offset + (c.rows - 1) * c.dst_stride + c.cols + 3;
        const auto xv = random_vector(src_n, 91);
        std::vector<float> want(dst_n, 12345.0f);
        for (int r = 0; r < c.rows; ++r)
            for (int k = 0; k < c.cols; ++k)
                want[c.dst_offset + r * c.dst_stride + k] = xv[c.src_offset + r * c.src_stride + k];
        const auto x = upload(xv);
        auto y = output(dst_n);
        cpu_->copy_rows(*cq_, c.rows, c.cols, x.cpu, c.src_offset, c.src_stride, y.cpu,
                        c.dst_offset, c.dst_stride);
        ocl_->copy_rows(*oq_, c.rows, c.cols, x.ocl, c.src_offset, c.src_stride, y.ocl,
                        c.dst_offset, c.dst_stride);
        expect_both_equal("copy_rows " + std::to_string(c.rows) + "x" + std::to_string(c.cols), y,
                          want, 0.0);
    }
    // A block past the end of a buffer is refused, not written.
    const auto x = upload(random_vector(10, 1));
    auto y = output(10);
    EXPECT_THROW(cpu_->copy_rows(*cq_, 2, 6, x.cpu, 0, 6, y.cpu, 0, 6), std::invalid_argument);
    EXPECT_THROW(ocl_->copy_rows(*oq_, 2, 6, x.ocl, 0, 6, y.ocl, 0, 6), std::invalid_argument);
    EXPECT_THROW(ocl_->copy_rows(*oq_, 1, 2, y.ocl, 0, 2, y.ocl, 4, 2), std::invalid_argument);
}

TEST_F(OpenClParity, Transpose) {
    struct Size {
        int rows, cols;
    };
    // Tile-sized, ragged on either side, and single rows or columns.
    for (Size s :
         {Size{1, 1}, Size{1, 100}, Size{100, 1}, Size{37, 65}, Size{64, 64}, Size{17, 300}}) {
        std::vector<float> xv(std::size_t(s.rows) * s.cols), want(xv.size());
        for (int r = 0; r < s.rows; ++r)
            for (int c = 0; c < s.cols; ++c) {
                xv[std::size_t(r) * s.cols + c] = r * 1000.0f + c;  // its own position
                want[std::size_t(c) * s.rows + r] = r * 1000.0f + c;
            }
        const auto x = upload(xv);
        auto y = output(xv.size());
        cpu_->transpose(*cq_, s.rows, s.cols, x.cpu, y.cpu);
        ocl_->transpose(*oq_, s.rows, s.cols, x.ocl, y.ocl);
        expect_both_equal("transpose " + std::to_string(s.rows) + "x" + std::to_string(s.cols), y,
                          want, 0.0);
    }
    // In place, work-groups would overwrite input others have yet to read.
    auto x = upload(random_vector(12, 1650));
    EXPECT_THROW(ocl_->transpose(*oq_, 3, 4, x.ocl, x.ocl), std::invalid_argument);
}

TEST_F(OpenClParity, AddBias) {
    const int rows = 19, cols = 70;
    const auto yv = random_vector(std::size_t(rows) * cols, 1700);
    for (bool per_row : {true, false}) {
        const auto bv = random_vector(per_row ? rows : cols, per_row ? 1701 : 1702);
        std::vector<float> want(yv.size());
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c)
                want[std::size_t(r) * cols + c] =
                    yv[std::size_t(r) * cols + c] + (per_row ? bv[r] : bv[c]);
        const auto b = upload(bv);
        auto y = upload(yv);
        cpu_->add_bias(*cq_, rows, cols, b.cpu, per_row, y.cpu);
        ocl_->add_bias(*oq_, rows, cols, b.ocl, per_row, y.ocl);
        expect_both_equal(std::string("add_bias ") + (per_row ? "per row" : "per column"), y, want,
                          0.0);
    }
}

TEST_F(OpenClParity, PolarSpectrum) {
    for (int frames : {1, 9})
        for (int bins : {33, 513}) {
            // Log-magnitudes in [-6, 6] (above log 100 = 4.6 the clamp
            // applies), phases over several turns.
            std::vector<float> xv(std::size_t(frames) * 2 * bins);
            const auto lm = random_vector(std::size_t(frames) * bins, 1800 + bins, -6.0f, 6.0f);
            const auto ph = random_vector(std::size_t(frames) * bins, 1801 + bins, -20.0f, 20.0f);
            for (int f = 0; f < frames; ++f)
                for (int k = 0; k < bins; ++k) {
                    xv[std::size_t(f) * 2 * bins + k] = lm[std::size_t(f) * bins + k];
                    xv[std::size_t(f) * 2 * bins + bins + k] = ph[std::size_t(f) * bins + k];
                }
            const auto x = upload(xv);
            auto y = output(xv.size());
            cpu_->polar_spectrum(*cq_, frames, bins, 100.0f, x.cpu, y.cpu);
            ocl_->polar_spectrum(*oq_, frames, bins, 100.0f, x.ocl, y.ocl);
            expect_close(
                "polar_spectrum frames=" + std::to_string(frames) + " bins=" + std::to_string(bins),
                y, kElementwiseTol);
        }
    auto x = upload(random_vector(2 * 33, 1802));
    EXPECT_THROW(ocl_->polar_spectrum(*oq_, 1, 33, 100.0f, x.ocl, x.ocl), std::invalid_argument);
}

TEST_F(OpenClParity, FrameSignalAndOverlapAdd) {
    struct Case {
        int n_fft, hop, n_frames;
    };
    // Overlapping frames, odd sizes, and frames with gaps between them.
    const Case cases[] = {{512, 128, 9}, {37, 10, 7}, {16, 20, 4}, {64, 64, 1}};
    for (const auto& c : cases) {
        const std::size_t len = std::size_t(c.n_frames - 1) * c.hop + c.n_fft;
        const std::string shape = " n_fft=" + std::to_string(c.n_fft) +
                                  " hop=" + std::to_string(c.hop) +
                                  " frames=" + std::to_string(c.n_frames);
        const auto signal = upload(random_vector(len, 700 + c.n_fft));
        const auto window = upload(random_vector(c.n_fft, 701, 0.0f, 1.0f));
        auto frames = output(std::size_t(c.n_fft) * c.n_frames);
        cpu_->frame_signal(*cq_, signal.cpu, c.n_fft, c.hop, c.n_frames, window.cpu, frames.cpu);
        ocl_->frame_signal(*oq_, signal.ocl, c.n_fft, c.hop, c.n_frames, window.ocl, frames.ocl);
        expect_close("frame_signal" + shape, frames, kElementwiseTol);

        auto out = output(len);
        cpu_->overlap_add(*cq_, frames.cpu, c.n_fft, c.hop, c.n_frames, window.cpu, out.cpu);
        ocl_->overlap_add(*oq_, frames.ocl, c.n_fft, c.hop, c.n_frames, window.ocl, out.ocl);
        expect_close("overlap_add" + shape, out, kElementwiseTol);
    }
}

TEST_F(OpenClParity, ComplexOps) {
    for (std::size_t n : {1u, 257u, 1000u}) {
        const auto a = upload(random_vector(2 * n, 800 + static_cast<unsigned>(n)));
        const auto b = upload(random_vector(2 * n, 801 + static_cast<unsigned>(n)));
        auto c = output(2 * n);
        cpu_->complex_multiply(*cq_, a.cpu, b.cpu, c.cpu, n);
        ocl_->complex_multiply(*oq_, a.ocl, b.ocl, c.ocl, n);
        expect_close("complex_multiply n=" + std::to_string(n), c, kElementwiseTol);

        // Log-magnitudes in [-3, 3], phases over several turns.
        std::vector<float> x = random_vector(2 * n, 802 + static_cast<unsigned>(n), -3.0f, 3.0f);
        for (std::size_t i = 1; i < x.size(); i += 2) x[i] *= 4.0f;
        const auto xs = upload(x);
        auto y = output(2 * n);
        cpu_->complex_exp(*cq_, xs.cpu, y.cpu, n);
        ocl_->complex_exp(*oq_, xs.ocl, y.ocl, n);
        expect_close("complex_exp n=" + std::to_string(n), y, kElementwiseTol);
    }
}

TEST_F(OpenClParity, MinimumPhaseFold) {
    for (int n : {512, 37})
        for (int batch : {1, 3}) {
            const auto x = upload(random_vector(std::size_t(n) * batch, 900 + n));
            auto y = output(std::size_t(n) * batch);
            cpu_->minimum_phase_fold(*cq_, n, batch, x.cpu, y.cpu);
            ocl_->minimum_phase_fold(*oq_, n, batch, x.ocl, y.ocl);
            expect_close(
                "minimum_phase_fold n=" + std::to_string(n) + " batch=" + std::to_string(batch), y,
                kElementwiseTol);
        }
}

TEST_F(OpenClParity, CopiesWithOffsetsAndPinnedMemory) {
    const auto data = random_vector(1000, 1000);
    auto buf = ocl_->allocate(1000, "test");
    ocl_->fill(*oq_, buf, 0.0f, 1000);
    ocl_->copy_to_device(*oq_, buf, 100, data.data() + 100, 500);
    PinnedBuffer pinned(ocl_, ocl_->allocate_pinned(1000), 1000);
    std::fill(pinned.data(), pinned.data() + 1000, -1.0f);
    ocl_->copy_to_host(*oq_, pinned.data() + 50, buf, 50, 600);
    ocl_->synchronize(*oq_);
    for (int i = 0; i < 1000; ++i) {
        const float want = i < 50 || i >= 650 ? -1.0f : (i >= 100 && i < 600 ? data[i] : 0.0f);
        ASSERT_EQ(pinned.data()[i], want) << i;
    }
}

TEST_F(OpenClParity, TimingsAreRecordedPerOp) {
    ocl_->reset_timings();
    const auto a = upload(random_vector(64 * 64, 1100));
    auto c = output(64 * 64);
    ocl_->gemm(*oq_, false, false, 64, 64, 64, 1.0f, a.ocl, 64, a.ocl, 64, 0.0f, c.ocl, 64);
    ocl_->activation(*oq_, Activation::Gelu, c.ocl, c.ocl, 64 * 64, 0.0f);
    (void)ocl_data(c);  // synchronises, which collects the events
    auto timings = ocl_->kernel_timings();
    const auto find = [&](const std::string& name) {
        return std::find_if(timings.begin(), timings.end(),
                            [&](const KernelTiming& t) { return t.name == name; });
    };
    for (const char* name : {"gemm", "gelu", "h2d", "d2h"}) {
        auto it = find(name);
        ASSERT_NE(it, timings.end()) << name;
        EXPECT_GE(it->calls, 1u) << name;
        EXPECT_GE(it->total_ms, 0.0) << name;
        EXPECT_GE(it->total_ms, it->max_ms) << name;
    }
    ocl_->reset_timings();
    EXPECT_TRUE(ocl_->kernel_timings().empty());
}

TEST_F(OpenClParity, QueuesOnSeveralThreads) {
    const auto a = random_vector(48 * 40, 1200);
    const auto b = random_vector(40 * 56, 1201);
    std::vector<float> ref(48 * 56);
    {
        auto ca = cpu_->allocate(a.size(), "t"), cb = cpu_->allocate(b.size(), "t"),
             cc = cpu_->allocate(ref.size(), "t");
        cpu_->copy_to_device(*cq_, ca, 0, a.data(), a.size());
        cpu_->copy_to_device(*cq_, cb, 0, b.data(), b.size());
        cpu_->gemm(*cq_, false, false, 48, 56, 40, 1.0f, ca, 40, cb, 56, 0.0f, cc, 56);
        cpu_->copy_to_host(*cq_, ref.data(), cc, 0, ref.size());
    }
    std::vector<double> errors(4, 1.0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            auto q = ocl_->create_queue();
            auto da = ocl_->allocate(a.size(), "t"), db = ocl_->allocate(b.size(), "t"),
                 dc = ocl_->allocate(ref.size(), "t");
            std::vector<float> got(ref.size());
            ocl_->copy_to_device(*q, da, 0, a.data(), a.size());
            ocl_->copy_to_device(*q, db, 0, b.data(), b.size());
            for (int rep = 0; rep < 10; ++rep)
                ocl_->gemm(*q, false, false, 48, 56, 40, 1.0f, da, 40, db, 56, 0.0f, dc, 56);
            ocl_->copy_to_host(*q, got.data(), dc, 0, got.size());
            ocl_->synchronize(*q);
            errors[t] = relative_error(ref, got);
        });
    for (auto& th : threads) th.join();
    for (double e : errors) EXPECT_LE(e, kReductionTol);
}

TEST_F(OpenClParity, InjectedKernelFailureThrowsAndMarksFailed) {
    const auto x = upload(random_vector(100, 1300));
    auto y = output(100);
    ocl_->inject_fault({GpuFault::KernelFailure, 1, 0});
    EXPECT_THROW(ocl_->activation(*oq_, Activation::Tanh, x.ocl, y.ocl, 100, 0.0f), DeviceError);
    EXPECT_EQ(ocl_->health(), Health::Failed);
    EXPECT_FALSE(ocl_->last_error().empty());
    ocl_->reset_health();
    // One fault only: the next op runs.
    ocl_->activation(*oq_, Activation::Tanh, x.ocl, y.ocl, 100, 0.0f);
    ocl_->synchronize(*oq_);
    EXPECT_EQ(ocl_->health(), Health::Ok);
}

TEST_F(OpenClParity, InjectedOutOfMemory) {
    ocl_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(ocl_->raw_allocate(1024), OutOfMemory);
    const auto a = upload(random_vector(16 * 16, 1400));
    auto c = output(16 * 16);
    ocl_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(
        ocl_->gemm(*oq_, false, false, 16, 16, 16, 1.0f, a.ocl, 16, a.ocl, 16, 0.0f, c.ocl, 16),
        OutOfMemory);
    // Spent: allocations work again.
    void* h = ocl_->raw_allocate(1024);
    ocl_->raw_free(h);
}

TEST_F(OpenClParity, InjectedLateFaultDelaysTheOp) {
    const auto x = upload(random_vector(100, 1500));
    auto y = output(100);
    constexpr double kDelayMs = 120;
    ocl_->inject_fault({GpuFault::Late, 1, kDelayMs});
    const auto t0 = std::chrono::steady_clock::now();
    ocl_->activation(*oq_, Activation::Sin, x.ocl, y.ocl, 100, 0.0f);
    ocl_->synchronize(*oq_);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ opencl ] late fault of %.0f ms: op took %.1f ms\n", kDelayMs, ms);
    EXPECT_GE(ms, 0.8 * kDelayMs);
    // Late, but still right.
    cpu_->activation(*cq_, Activation::Sin, x.cpu, y.cpu, 100, 0.0f);
    expect_close("sin after a late fault", y, kElementwiseTol);
}

TEST_F(OpenClParity, TooLargeAllocationThrowsOutOfMemory) {
    const std::size_t too_big = ocl_->info().global_memory * 2 + 4096;
    EXPECT_THROW(ocl_->raw_allocate(too_big), OutOfMemory);
    EXPECT_THROW(ocl_->allocate(too_big / sizeof(float), "huge"), OutOfMemory);
    // Out of memory is recoverable: the device stays usable.
    EXPECT_EQ(ocl_->health(), Health::Ok);
    auto small = ocl_->allocate(16, "small");
    ocl_->fill(*oq_, small, 1.0f, 16);
    ocl_->synchronize(*oq_);
}

}  // namespace
}  // namespace etude::gpu
