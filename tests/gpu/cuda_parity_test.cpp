// Parity of the CUDA backend with the CPU reference, op by op, plus fault
// injection and allocation failure.
//
// The backend lives in libetude_cuda.so, which this program does not link:
// it is loaded here with dlopen, as the registry does, from
// $ETUDE_CUDA_MODULE or else from the build tree next to this program
// (<build>/tests/etude_tests_gpu -> <build>/gpu/cuda/libetude_cuda.so).
// Without the module (a build without nvcc), without a driver or without a
// GPU, every test here is skipped with the reason.
//
// Tolerances are relative to the largest magnitude of the reference output:
// 1e-5 for element-wise and layout ops, 1e-4 where long sums (GEMM,
// convolution, FFT, layer norm) accumulate rounding in a different order.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/registry.h"

namespace etude::gpu {
namespace {

// The CUDA module is found and loaded by the device registry, exactly as the
// engine finds it (ETUDE_CUDA_MODULE, the build tree, the install path).
struct CudaModule {
    bool available = false;
    std::string unusable;  // why not, with the registry's note
};

const CudaModule& cuda_module() {
    static const CudaModule module = [] {
        CudaModule m;
        try {
            DeviceRegistry::instance().resolve({"cuda", -1});
            m.available = true;
        } catch (const std::exception& e) {
            m.unusable = e.what();
        }
        return m;
    }();
    return module;
}

// max |got - want| / max |want| (absolute when the reference is all zeros).
double relative_to_max(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0, peak = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
        peak = std::max(peak, std::abs(static_cast<double>(want[i])));
    }
    return peak > 0 ? diff / peak : diff;
}

void expect_close(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want, double tolerance) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const double err = relative_to_max(got, want);
    std::printf("[   CUDA   ] %-48s max error %.3g (tolerance %.0e)\n", what.c_str(), err,
                tolerance);
    EXPECT_LE(err, tolerance) << what;
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << what << ": non-finite output";
}

class CudaParity : public ::testing::Test {
  protected:
    void SetUp() override {
        const CudaModule& m = cuda_module();
        if (!m.available) GTEST_SKIP() << m.unusable << " — CUDA parity tests skipped";
        gpu_ = DeviceRegistry::instance().open({"cuda", 0});
        gpu_->reset_health();
        gq_ = gpu_->create_queue();
        cq_ = cpu_.create_queue();
    }

    std::vector<float> random(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
        std::uniform_real_distribution<float> d(lo, hi);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng_);
        return v;
    }

    // The same data on both backends.
    struct Pair {
        DeviceBuffer gpu, cpu;
    };
    Pair upload(const std::vector<float>& v) {
        Pair p{gpu_->allocate(v.size(), "test"), cpu_.allocate(v.size(), "test")};
        gpu_->copy_to_device(*gq_, p.gpu, 0, v.data(), v.size());
        cpu_.copy_to_device(*cq_, p.cpu, 0, v.data(), v.size());
        gpu_->synchronize(*gq_);
        return p;
    }
    // Output buffers pre-filled with garbage, so "not written" shows up.
    Pair output(std::size_t n) { return upload(std::vector<float>(n, 123.0f)); }
    Pair empty() { return Pair{}; }

    std::vector<float> from_gpu(const DeviceBuffer& b, std::size_t n) {
        std::vector<float> v(n);
        gpu_->copy_to_host(*gq_, v.data(), b, 0, n);
        gpu_->synchronize(*gq_);
        return v;
    }
    std::vector<float> from_cpu(const DeviceBuffer& b, std::size_t n) {
        std::vector<float> v(n);
        cpu_.copy_to_host(*cq_, v.data(), b, 0, n);
        return v;
    }
    void compare(const std::string& what, const Pair& p, std::size_t n, double tolerance) {
        expect_close(what, from_gpu(p.gpu, n), from_cpu(p.cpu, n), tolerance);
    }

    // Declared first: destroyed after the queues and buffers that use it.
    std::shared_ptr<Backend> gpu_;
    CpuBackend cpu_;
    std::unique_ptr<Queue> gq_, cq_;
    std::mt19937 rng_{20240611};
};

class CudaFaults : public CudaParity {};

TEST_F(CudaParity, DeviceInfoDescribesAnNvidiaGpu) {
    const DeviceInfo& info = gpu_->info();
    EXPECT_EQ(info.kind, BackendKind::Cuda);
    EXPECT_TRUE(info.is_gpu);
    EXPECT_EQ(info.vendor, "NVIDIA");
    EXPECT_FALSE(info.name.empty());
    EXPECT_EQ(info.platform.rfind("CUDA ", 0), 0u) << info.platform;
    EXPECT_GT(info.global_memory, 0u);
    EXPECT_GT(info.compute_units, 0);
    const auto& caps = info.capabilities;
    EXPECT_TRUE(std::any_of(caps.begin(), caps.end(),
                            [](const std::string& c) { return c.rfind("sm_", 0) == 0; }));
    for (const char* c : {"fft", "gemm", "profiling"})
        EXPECT_NE(std::find(caps.begin(), caps.end(), c), caps.end()) << c;
    std::printf("[   CUDA   ] %s, %s, driver %s, %d SMs, %.1f GiB\n", info.name.c_str(),
                info.platform.c_str(), info.driver.c_str(), info.compute_units,
                static_cast<double>(info.global_memory) / (1u << 30));
}

TEST_F(CudaParity, CopiesWithOffsetsAndFill) {
    const std::size_t n = 1001;
    auto dst = output(n);
    gpu_->fill(*gq_, dst.gpu, 7.5f, n);
    cpu_.fill(*cq_, dst.cpu, 7.5f, n);
    const auto src = random(555);
    gpu_->copy_to_device(*gq_, dst.gpu, 123, src.data(), src.size());
    cpu_.copy_to_device(*cq_, dst.cpu, 123, src.data(), src.size());
    std::vector<float> g(800), c(800);
    gpu_->copy_to_host(*gq_, g.data(), dst.gpu, 100, g.size());
    cpu_.copy_to_host(*cq_, c.data(), dst.cpu, 100, c.size());
    gpu_->synchronize(*gq_);
    expect_close("copy/fill with offsets", g, c, 0.0);
    compare("fill + copy, whole buffer", dst, n, 0.0);
}

TEST_F(CudaParity, CopyRowsWithOffsetsAndStrides) {
    struct Case {
        int rows, cols;
        std::size_t src_offset, src_stride, dst_offset, dst_stride;
    };
    for (Case c : {Case{1, 1, 0, 1, 0, 1}, Case{3, 5, 2, 9, 1, 7}, Case{64, 12, 100, 40, 0, 12}}) {
        const std::size_t src_n = c.src_offset + (c.rows - 1) * c.src_stride + c.cols + 3;
        const std::size_t dst_n = c.dst_offset + (c.rows - 1) * c.dst_stride + c.cols + 3;
        const auto src = upload(random(src_n));
        auto dst = output(dst_n);
        gpu_->copy_rows(*gq_, c.rows, c.cols, src.gpu, c.src_offset, c.src_stride, dst.gpu,
                        c.dst_offset, c.dst_stride);
        cpu_.copy_rows(*cq_, c.rows, c.cols, src.cpu, c.src_offset, c.src_stride, dst.cpu,
                       c.dst_offset, c.dst_stride);
        compare("copy_rows " + std::to_string(c.rows) + "x" + std::to_string(c.cols), dst, dst_n,
                0.0);
    }
}

TEST_F(CudaParity, Activations) {
    const std::size_t n = 100003;  // not a multiple of the block size
    for (Activation f : {Activation::LeakyRelu, Activation::Gelu, Activation::Tanh, Activation::Exp,
                         Activation::Sin, Activation::Cos}) {
        const bool trig = f == Activation::Sin || f == Activation::Cos;
        auto x = upload(random(n, trig ? -10.0f : -4.0f, trig ? 10.0f : 4.0f));
        auto y = output(n);
        gpu_->activation(*gq_, f, x.gpu, y.gpu, n, 0.1f);
        cpu_.activation(*cq_, f, x.cpu, y.cpu, n, 0.1f);
        compare(std::string("activation ") + to_string(f), y, n, 1e-5);
        // In place, on a prefix only: the tail must stay untouched.
        gpu_->activation(*gq_, f, x.gpu, x.gpu, n - 17, 0.1f);
        cpu_.activation(*cq_, f, x.cpu, x.cpu, n - 17, 0.1f);
        compare(std::string("activation in place ") + to_string(f), x, n, 1e-5);
    }
}

TEST_F(CudaParity, GemmTransposesAndLeadingDimensions) {
    struct Size {
        int m, n, k;
    };
    for (Size s : {Size{37, 53, 29}, Size{128, 96, 64}, Size{129, 67, 255}, Size{1, 300, 17}})
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                // Stored shapes, with row strides wider than the rows.
                const int a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
                const int b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
                const int lda = a_cols + 3, ldb = b_cols + 5, ldc = s.n + 2;
                auto a = upload(random(static_cast<std::size_t>(a_rows) * lda));
                auto b = upload(random(static_cast<std::size_t>(b_rows) * ldb));
                const std::size_t c_size = static_cast<std::size_t>(s.m) * ldc;
                auto c = upload(random(c_size));
                gpu_->gemm(*gq_, ta, tb, s.m, s.n, s.k, 0.7f, a.gpu, lda, b.gpu, ldb, 0.3f, c.gpu,
                           ldc);
                cpu_.gemm(*cq_, ta, tb, s.m, s.n, s.k, 0.7f, a.cpu, lda, b.cpu, ldb, 0.3f, c.cpu,
                          ldc);
                // The whole of C, padding included: it must be left alone.
                compare("gemm " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                            std::to_string(s.k) + (ta ? " A^T" : " A") + (tb ? " B^T" : " B"),
                        c, c_size, 1e-4);
            }
}

std::string describe(const char* op, const Conv1dShape& s, bool bias) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s b%d %d->%d len%d k%d s%d d%d p%d g%d%s", op, s.batch,
                  s.in_channels, s.out_channels, s.in_length, s.kernel, s.stride, s.dilation,
                  s.padding, s.groups, bias ? "" : " nobias");
    return buf;
}

TEST_F(CudaParity, Conv1dStrideDilationPaddingGroups) {
    struct Case {
        Conv1dShape s;
        bool bias;
    };
    const Case cases[] = {
        {{.batch = 2,
          .in_channels = 6,
          .out_channels = 10,
          .in_length = 101,
          .kernel = 5,
          .padding = 2},
         true},
        {{.batch = 1,
          .in_channels = 8,
          .out_channels = 12,
          .in_length = 257,
          .kernel = 3,
          .stride = 2,
          .dilation = 3,
          .padding = 4,
          .groups = 2},
         false},
        {{.batch = 3,
          .in_channels = 16,
          .out_channels = 16,
          .in_length = 203,
          .kernel = 7,
          .padding = 3,
          .groups = 16},
         true},
        {{.batch = 1,
          .in_channels = 64,
          .out_channels = 48,
          .in_length = 1000,
          .kernel = 7,
          .dilation = 5,
          .padding = 15},
         true},
        {{.batch = 2,
          .in_channels = 5,
          .out_channels = 7,
          .in_length = 50,
          .kernel = 4,
          .stride = 3},
         false},
    };
    for (const auto& [s, with_bias] : cases) {
        auto x = upload(random(static_cast<std::size_t>(s.batch) * s.in_channels * s.in_length));
        auto w = upload(random(static_cast<std::size_t>(s.out_channels) *
                               (s.in_channels / s.groups) * s.kernel));
        auto b = with_bias ? upload(random(s.out_channels)) : empty();
        const std::size_t out =
            static_cast<std::size_t>(s.batch) * s.out_channels * s.conv_out_length();
        auto y = output(out);
        gpu_->conv1d(*gq_, s, x.gpu, w.gpu, b.gpu, y.gpu);
        cpu_.conv1d(*cq_, s, x.cpu, w.cpu, b.cpu, y.cpu);
        compare(describe("conv1d", s, with_bias), y, out, 1e-4);
    }
}

TEST_F(CudaParity, ConvTranspose1d) {
    struct Case {
        Conv1dShape s;
        bool bias;
    };
    const Case cases[] = {
        // The HiFi-GAN-style upsampler: stride 8, kernel 16, padding 4.
        {{.batch = 1,
          .in_channels = 32,
          .out_channels = 16,
          .in_length = 77,
          .kernel = 16,
          .stride = 8,
          .padding = 4},
         true},
        {{.batch = 2,
          .in_channels = 8,
          .out_channels = 6,
          .in_length = 50,
          .kernel = 5,
          .stride = 3,
          .dilation = 2,
          .padding = 1,
          .groups = 2},
         false},
        {{.batch = 1,
          .in_channels = 4,
          .out_channels = 4,
          .in_length = 33,
          .kernel = 4,
          .stride = 2,
          .padding = 1,
          .groups = 4},
         true},
        {{.batch = 1, .in_channels = 3, .out_channels = 5, .in_length = 41, .kernel = 3}, false},
    };
    for (const auto& [s, with_bias] : cases) {
        auto x = upload(random(static_cast<std::size_t>(s.batch) * s.in_channels * s.in_length));
        auto w = upload(random(static_cast<std::size_t>(s.in_channels) *
                               (s.out_channels / s.groups) * s.kernel));
        auto b = with_bias ? upload(random(s.out_channels)) : empty();
        const std::size_t out =
            static_cast<std::size_t>(s.batch) * s.out_channels * s.transpose_out_length();
        auto y = output(out);
        gpu_->conv_transpose1d(*gq_, s, x.gpu, w.gpu, b.gpu, y.gpu);
        cpu_.conv_transpose1d(*cq_, s, x.cpu, w.cpu, b.cpu, y.cpu);
        compare(describe("conv_transpose1d", s, with_bias), y, out, 1e-4);
    }
}

TEST_F(CudaParity, LayerNorm) {
    struct Size {
        int rows, cols;
    };
    for (Size s : {Size{37, 193}, Size{5, 1000}, Size{64, 80}, Size{3, 7}}) {
        const std::size_t n = static_cast<std::size_t>(s.rows) * s.cols;
        // An offset mean exercises the two-pass variance.
        auto x = upload(random(n, 1.0f, 5.0f));
        auto g = upload(random(s.cols, 0.5f, 1.5f));
        auto b = upload(random(s.cols));
        auto y = output(n);
        gpu_->layer_norm(*gq_, s.rows, s.cols, 1e-5f, x.gpu, g.gpu, b.gpu, y.gpu);
        cpu_.layer_norm(*cq_, s.rows, s.cols, 1e-5f, x.cpu, g.cpu, b.cpu, y.cpu);
        compare("layer_norm " + std::to_string(s.rows) + "x" + std::to_string(s.cols), y, n, 1e-4);
    }
}

TEST_F(CudaParity, RfftIrfftAndRoundTrip) {
    struct Size {
        int n, batch;
    };
    for (Size s : {Size{512, 7}, Size{1000, 3}, Size{96, 5}, Size{2048, 1}, Size{1001, 2}}) {
        const std::size_t real = static_cast<std::size_t>(s.n) * s.batch;
        const std::size_t bins = static_cast<std::size_t>(s.n / 2 + 1);
        const std::size_t cplx = bins * 2 * s.batch;
        const std::string size = " n=" + std::to_string(s.n) + " batch=" + std::to_string(s.batch);

        auto x = upload(random(real));
        auto spec = output(cplx);
        gpu_->rfft(*gq_, s.n, s.batch, x.gpu, spec.gpu);
        cpu_.rfft(*cq_, s.n, s.batch, x.cpu, spec.cpu);
        compare("rfft" + size, spec, cplx, 1e-4);

        // A random spectrum, not Hermitian-consistent at DC and Nyquist: the
        // interface ignores those imaginary parts (as FFTW and PyTorch do;
        // a network's spectrum, e.g. Vocos' head, has them nonzero).
        auto v = random(cplx);
        auto in = upload(v);
        auto y = output(real);
        gpu_->irfft(*gq_, s.n, s.batch, in.gpu, y.gpu);
        cpu_.irfft(*cq_, s.n, s.batch, in.cpu, y.cpu);
        compare("irfft" + size, y, real, 1e-4);
        // irfft must not have changed its input (cuFFT's C2R overwrites it).
        compare("irfft leaves its input alone" + size, in, cplx, 0.0);

        auto back = output(real);
        gpu_->irfft(*gq_, s.n, s.batch, spec.gpu, back.gpu);
        expect_close("irfft(rfft(x)) == x" + size, from_gpu(back.gpu, real), from_cpu(x.cpu, real),
                     1e-5);
    }
}

TEST_F(CudaParity, FrameSignalAndOverlapAdd) {
    struct Size {
        int n_fft, hop, frames;
    };
    // Overlapping, exactly tiling, and with gaps between frames.
    for (Size s : {Size{400, 100, 13}, Size{512, 128, 9}, Size{64, 64, 4}, Size{64, 100, 5}}) {
        const std::size_t len = static_cast<std::size_t>(s.frames - 1) * s.hop + s.n_fft;
        const std::size_t framed = static_cast<std::size_t>(s.frames) * s.n_fft;
        const std::string size = " n_fft=" + std::to_string(s.n_fft) +
                                 " hop=" + std::to_string(s.hop) +
                                 " frames=" + std::to_string(s.frames);
        auto signal = upload(random(len));
        auto window = upload(random(s.n_fft, 0.0f, 1.0f));
        auto frames = output(framed);
        gpu_->frame_signal(*gq_, signal.gpu, s.n_fft, s.hop, s.frames, window.gpu, frames.gpu);
        cpu_.frame_signal(*cq_, signal.cpu, s.n_fft, s.hop, s.frames, window.cpu, frames.cpu);
        compare("frame_signal" + size, frames, framed, 1e-5);

        auto out = output(len);  // garbage first: overlap_add overwrites
        gpu_->overlap_add(*gq_, frames.gpu, s.n_fft, s.hop, s.frames, window.gpu, out.gpu);
        cpu_.overlap_add(*cq_, frames.cpu, s.n_fft, s.hop, s.frames, window.cpu, out.cpu);
        compare("overlap_add" + size, out, len, 1e-5);
    }
}

TEST_F(CudaParity, ComplexMultiplyAndExp) {
    const std::size_t n = 1003;
    auto a = upload(random(2 * n));
    auto b = upload(random(2 * n));
    auto c = output(2 * n);
    gpu_->complex_multiply(*gq_, a.gpu, b.gpu, c.gpu, n);
    cpu_.complex_multiply(*cq_, a.cpu, b.cpu, c.cpu, n);
    compare("complex_multiply n=1003", c, 2 * n, 1e-5);

    std::vector<float> v = random(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        v[2 * i] = v[2 * i] * 2.0f - 1.0f;  // log-magnitude in [-3, 1]
        v[2 * i + 1] *= 10.0f;              // phase in [-10, 10]
    }
    auto x = upload(v);
    auto y = output(2 * n);
    gpu_->complex_exp(*gq_, x.gpu, y.gpu, n);
    cpu_.complex_exp(*cq_, x.cpu, y.cpu, n);
    compare("complex_exp n=1003", y, 2 * n, 1e-5);
}

TEST_F(CudaParity, MinimumPhaseFold) {
    struct Size {
        int n, batch;
    };
    for (Size s : {Size{512, 3}, Size{37, 2}, Size{1000, 1}}) {
        const std::size_t total = static_cast<std::size_t>(s.n) * s.batch;
        auto x = upload(random(total));
        auto y = output(total);
        gpu_->minimum_phase_fold(*gq_, s.n, s.batch, x.gpu, y.gpu);
        cpu_.minimum_phase_fold(*cq_, s.n, s.batch, x.cpu, y.cpu);
        compare("minimum_phase_fold n=" + std::to_string(s.n), y, total, 1e-5);
    }
}

TEST_F(CudaParity, AxpbyOverwritesWhenBetaIsZeroAndWorksInPlace) {
    const std::size_t n = 100003;  // not a multiple of the block size
    const auto xv = random(n);
    auto x = upload(xv);
    auto y = upload(random(n));
    gpu_->axpby(*gq_, n, 1.5f, x.gpu, -0.25f, y.gpu);
    cpu_.axpby(*cq_, n, 1.5f, x.cpu, -0.25f, y.cpu);
    compare("axpby alpha=1.5 beta=-0.25", y, n, 1e-5);

    // beta == 0: y's NaNs must not leak into the result.
    auto z = upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
    gpu_->axpby(*gq_, n, -2.0f, x.gpu, 0.0f, z.gpu);
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = -2.0f * xv[i];
    expect_close("axpby beta=0 over NaN == -2x", from_gpu(z.gpu, n), want, 0.0);

    // In place, on a prefix: the tail stays as it was.
    gpu_->axpby(*gq_, n - 17, 0.5f, x.gpu, 2.0f, x.gpu);
    cpu_.axpby(*cq_, n - 17, 0.5f, x.cpu, 2.0f, x.cpu);
    compare("axpby in place", x, n, 1e-5);
}

TEST_F(CudaParity, TransposeMovesEveryElement) {
    struct Size {
        int rows, cols;
    };
    for (Size s :
         {Size{1, 1}, Size{1, 1000}, Size{1000, 1}, Size{37, 65}, Size{256, 512}, Size{33, 3000}}) {
        const std::size_t n = static_cast<std::size_t>(s.rows) * s.cols;
        std::vector<float> xv(n), want(n);
        for (int r = 0; r < s.rows; ++r)
            for (int c = 0; c < s.cols; ++c) {
                // Each value is its own position (exact in float at these sizes).
                xv[static_cast<std::size_t>(r) * s.cols + c] = static_cast<float>(r * 4096 + c);
                want[static_cast<std::size_t>(c) * s.rows + r] = static_cast<float>(r * 4096 + c);
            }
        auto x = upload(xv);
        auto y = output(n);
        gpu_->transpose(*gq_, s.rows, s.cols, x.gpu, y.gpu);
        cpu_.transpose(*cq_, s.rows, s.cols, x.cpu, y.cpu);
        const std::string size = std::to_string(s.rows) + "x" + std::to_string(s.cols);
        expect_close("transpose " + size + " == x^T", from_gpu(y.gpu, n), want, 0.0);
        compare("transpose " + size, y, n, 0.0);
    }
    auto x = upload(random(12));
    EXPECT_THROW(gpu_->transpose(*gq_, 3, 4, x.gpu, x.gpu), std::invalid_argument);
}

TEST_F(CudaParity, AddBiasPerRowAndPerColumn) {
    const int rows = 129, cols = 77;
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    const auto yv = random(n);
    for (bool per_row : {true, false}) {
        const auto bv = random(per_row ? rows : cols);
        std::vector<float> want(n);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c)
                want[static_cast<std::size_t>(r) * cols + c] =
                    yv[static_cast<std::size_t>(r) * cols + c] + (per_row ? bv[r] : bv[c]);
        auto b = upload(bv);
        auto y = upload(yv);
        gpu_->add_bias(*gq_, rows, cols, b.gpu, per_row, y.gpu);
        cpu_.add_bias(*cq_, rows, cols, b.cpu, per_row, y.cpu);
        const std::string what = std::string("add_bias ") + (per_row ? "per row" : "per column");
        expect_close(what + " == y + bias", from_gpu(y.gpu, n), want, 0.0);
        compare(what, y, n, 0.0);
    }
}

TEST_F(CudaParity, PolarSpectrum) {
    struct Size {
        int frames, bins;
    };
    for (Size s : {Size{1, 33}, Size{100, 513}, Size{7, 1}}) {
        const std::size_t n = static_cast<std::size_t>(s.frames) * 2 * s.bins;
        // Log-magnitudes in [-6, 6] (above log 100 = 4.6 the clamp applies),
        // phases over several turns.
        const std::size_t per_half = static_cast<std::size_t>(s.frames) * s.bins;
        const auto logmag = random(per_half, -6.0f, 6.0f), phase = random(per_half, -20.0f, 20.0f);
        std::vector<float> xv(n);
        for (int f = 0; f < s.frames; ++f)
            for (int k = 0; k < s.bins; ++k) {
                const std::size_t i = static_cast<std::size_t>(f) * s.bins + k;
                xv[2 * static_cast<std::size_t>(f) * s.bins + k] = logmag[i];
                xv[2 * static_cast<std::size_t>(f) * s.bins + s.bins + k] = phase[i];
            }
        auto x = upload(xv);
        auto y = output(n);
        gpu_->polar_spectrum(*gq_, s.frames, s.bins, 100.0f, x.gpu, y.gpu);
        cpu_.polar_spectrum(*cq_, s.frames, s.bins, 100.0f, x.cpu, y.cpu);
        compare(
            "polar_spectrum frames=" + std::to_string(s.frames) + " bins=" + std::to_string(s.bins),
            y, n, 1e-5);
    }
    auto x = upload(random(2 * 33));
    EXPECT_THROW(gpu_->polar_spectrum(*gq_, 1, 33, 100.0f, x.gpu, x.gpu), std::invalid_argument);
}

TEST_F(CudaParity, KernelTimingsUseTheCpuNames) {
    gpu_->reset_timings();
    auto a = upload(random(64 * 64));
    auto c = output(64 * 64);
    gpu_->gemm(*gq_, false, false, 64, 64, 64, 1.0f, a.gpu, 64, a.gpu, 64, 0.0f, c.gpu, 64);
    gpu_->activation(*gq_, Activation::Gelu, c.gpu, c.gpu, 64 * 64);
    auto spec = output(64 * 33 * 2);
    gpu_->rfft(*gq_, 64, 64, c.gpu, spec.gpu);
    from_gpu(c.gpu, 16);  // a d2h, and synchronize() reads the timings
    const auto timings = gpu_->kernel_timings();
    for (const char* name : {"h2d", "d2h", "gemm", "gelu", "rfft"}) {
        const auto it = std::find_if(timings.begin(), timings.end(),
                                     [&](const KernelTiming& t) { return t.name == name; });
        ASSERT_NE(it, timings.end()) << name;
        EXPECT_GE(it->calls, 1u) << name;
        EXPECT_GE(it->total_ms, 0.0) << name;
        EXPECT_GE(it->total_ms, it->max_ms) << name;
    }
    gpu_->reset_timings();
    EXPECT_TRUE(gpu_->kernel_timings().empty());
}

TEST_F(CudaFaults, InjectedKernelFailureThrowsAndMarksFailed) {
    auto x = upload(random(256));
    gpu_->inject_fault({GpuFault::KernelFailure, 1, 0});
    EXPECT_THROW(gpu_->activation(*gq_, Activation::Tanh, x.gpu, x.gpu, 256), DeviceError);
    EXPECT_EQ(gpu_->health(), Health::Failed);
    EXPECT_FALSE(gpu_->last_error().empty());
    // The fault was used up: the next op runs.
    gpu_->reset_health();
    EXPECT_NO_THROW(gpu_->activation(*gq_, Activation::Tanh, x.gpu, x.gpu, 256));
    EXPECT_NO_THROW(gpu_->synchronize(*gq_));
    EXPECT_EQ(gpu_->health(), Health::Ok);
}

TEST_F(CudaFaults, InjectedOutOfMemory) {
    gpu_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(gpu_->allocate(1024, "test"), OutOfMemory);
    EXPECT_NO_THROW(gpu_->allocate(1024, "test"));
    auto x = upload(random(256));
    auto spec = output(2 * 65 * 2);
    gpu_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(gpu_->rfft(*gq_, 128, 2, x.gpu, spec.gpu), OutOfMemory);
}

TEST_F(CudaFaults, InjectedLatenessDelaysTheOp) {
    auto x = upload(random(4096));
    const double delay_ms = 100;
    gpu_->inject_fault({GpuFault::Late, 1, delay_ms});
    const auto t0 = std::chrono::steady_clock::now();
    gpu_->activation(*gq_, Activation::Sin, x.gpu, x.gpu, 4096);
    gpu_->synchronize(*gq_);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[   CUDA   ] late op took %.1f ms for a %.0f ms injected delay\n", ms, delay_ms);
    EXPECT_GE(ms, 0.8 * delay_ms);
    EXPECT_EQ(gpu_->health(), Health::Ok);
}

TEST_F(CudaFaults, TooLargeAllocationThrowsOutOfMemory) {
    // 128 TiB: more than any GPU has.
    EXPECT_THROW(gpu_->allocate(std::size_t{1} << 45, "huge"), OutOfMemory);
    // Running out is not a broken device: the backend goes on working.
    auto x = upload(random(1000));
    auto y = output(1000);
    gpu_->activation(*gq_, Activation::Exp, x.gpu, y.gpu, 1000);
    cpu_.activation(*cq_, Activation::Exp, x.cpu, y.cpu, 1000, 0.0f);
    compare("activation after a failed allocation", y, 1000, 1e-5);
}

}  // namespace
}  // namespace etude::gpu
