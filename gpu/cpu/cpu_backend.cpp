#include "gpu/cpu/cpu_backend.h"

#include <cblas.h>
#include <fftw3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "dsp/fft.h"
#include "gpu/cpu/cpu_conv.h"
#include "gpu/cpu/cpu_parallel.h"
#include "gpu/cpu/cpu_vector_math.h"
#include "gpu/cpu/cpu_worker_pool.h"
#include "gpu/cpu/openblas_kernels.h"
#include "gpu/kernels/spline_bodies.h"

namespace etude::gpu {
namespace {

class CpuQueue final : public Queue {};

inline float* f(const DeviceBuffer& b) {
    return static_cast<float*>(b.handle());
}

// Elements per job of an element-wise op: these are memory-bound, and below
// this a second thread costs more to wake than it saves.
constexpr std::size_t kElementGrain = std::size_t{1} << 15;
// Multiply-adds per job of a GEMM.
constexpr std::size_t kGemmGrain = std::size_t{1} << 20;

// body(begin, end) over ranges of [0, n) elements, split among the workers
// when the op is long enough. Ranges start on 16-float (64-byte) bounds.
template <class Body>
void for_elements(std::size_t n, Body&& body) {
    cpu::parallel_ranges(n, cpu::jobs_for(n, kElementGrain), 16, body);
}

// body(r0, r1) over ranges of `rows` rows of `cols` elements each, split as
// for_elements by the elements they hold.
template <class Body>
void for_rows(int rows, int cols, Body&& body) {
    const std::size_t n = static_cast<std::size_t>(std::max(rows, 0));
    cpu::parallel_ranges(n, cpu::jobs_for(n * std::max(cols, 0), kElementGrain), 1, body);
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const auto p = line.find(':');
            return p == std::string::npos ? line : line.substr(p + 2);
        }
    return "CPU";
}

}  // namespace

struct CpuBackend::FftPlans {
    fftwf_plan forward = nullptr, inverse = nullptr;
    ~FftPlans() {
        std::lock_guard lock(dsp::fftw_planner_mutex());
        if (forward) fftwf_destroy_plan(forward);
        if (inverse) fftwf_destroy_plan(inverse);
    }
};

// Times one operation when profiling (wall clock: on the CPU that is the
// device time) and applies any injected fault first.
class CpuBackend::Timer {
  public:
    Timer(CpuBackend& b, const char* name)
        : b_(b), name_(name), t0_(std::chrono::steady_clock::now()) {
        const double late_ms = b_.consume_fault(name);
        if (late_ms > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
    }
    ~Timer() {
        if (!b_.profiling()) return;
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_)
                .count();
        std::lock_guard lock(b_.timing_mu_);
        auto& t = b_.timings_[name_];
        t.name = name_;
        ++t.calls;
        t.total_ms += ms;
        t.max_ms = std::max(t.max_ms, ms);
    }

  private:
    CpuBackend& b_;
    const char* name_;
    std::chrono::steady_clock::time_point t0_;
};

CpuBackend::CpuBackend() {
    info_.kind = BackendKind::Cpu;
    info_.index = 0;
    info_.name = cpu_model();
    info_.vendor = "host";
    // With OpenBLAS's kernels named: they decide much of a Piper voice's
    // speed here, and OpenBLAS picks them by the CPUs it knows
    // (openblas_kernels.h).
    info_.platform = "FFTW3 + OpenBLAS (" + cpu::openblas_kernels() + " kernels)";
    info_.global_memory = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
    info_.compute_units = cpu::usable_cpus();
    info_.is_gpu = false;
    info_.capabilities = {"fft", "gemm", "fp64"};
}

CpuBackend::~CpuBackend() = default;

void* CpuBackend::raw_allocate(std::size_t bytes) {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    const double late = consume_fault("allocate");
    (void)late;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw OutOfMemory("host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
}
void CpuBackend::raw_free(void* handle) noexcept {
    std::free(handle);
}
float* CpuBackend::allocate_pinned(std::size_t floats) {
    return static_cast<float*>(raw_allocate(std::max<std::size_t>(floats, 1) * sizeof(float)));
}
void CpuBackend::free_pinned(float* p) noexcept {
    std::free(p);
}

std::unique_ptr<Queue> CpuBackend::create_queue() {
    return std::make_unique<CpuQueue>();
}

void CpuBackend::copy_to_device_impl(Queue&, DeviceBuffer& dst, std::size_t off, const float* src,
                                     std::size_t n) {
    Timer t(*this, "h2d");
    std::memcpy(f(dst) + off, src, n * sizeof(float));
}
void CpuBackend::copy_to_host_impl(Queue&, float* dst, const DeviceBuffer& src, std::size_t off,
                                   std::size_t n) {
    Timer t(*this, "d2h");
    std::memcpy(dst, f(src) + off, n * sizeof(float));
}
void CpuBackend::fill_impl(Queue&, DeviceBuffer& dst, float value, std::size_t n) {
    std::fill(f(dst), f(dst) + n, value);
}
void CpuBackend::synchronize(Queue& q) {
    refuse_while_recording(q, "synchronize");
}

void CpuBackend::activation_impl(Queue&, Activation fn, const DeviceBuffer& x, DeviceBuffer& y,
                                 std::size_t n, float alpha) {
    Timer t(*this, to_string(fn));
    for_elements(n, [&](std::size_t begin, std::size_t end) {
        const float* in = f(x) + begin;
        float* out = f(y) + begin;
        const std::size_t len = end - begin;
        switch (fn) {
            case Activation::LeakyRelu:
                // max/min rather than a branch: this form vectorises (it is a
                // large share of HiFi-GAN's time outside the convolutions).
                for (std::size_t i = 0; i < len; ++i)
                    out[i] = std::max(in[i], 0.0f) + alpha * std::min(in[i], 0.0f);
                break;
            case Activation::Gelu:
                cpu::gelu(in, out, len);
                break;
            case Activation::Tanh:
                cpu::tanh(in, out, len);
                break;
            case Activation::Exp:
                cpu::exp(in, out, len);
                break;
            case Activation::Sin:
                cpu::sin(in, out, len);
                break;
            case Activation::Cos:
                cpu::cos(in, out, len);
                break;
        }
    });
}

void CpuBackend::gemm_impl(Queue&, bool ta, bool tb, int m, int n, int k, float alpha,
                           const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb,
                           float beta, DeviceBuffer& c, int ldc) {
    Timer t(*this, "gemm");
    if (m <= 0 || n <= 0) return;
    // Split C along its longer side; each job is one single-threaded SGEMM
    // on its own rows (a slice of op(A)) or columns (a slice of op(B)).
    const int jobs = cpu::jobs_for(static_cast<std::size_t>(m) * n * std::max(k, 1), kGemmGrain);
    const bool by_rows = m >= n;
    cpu::parallel_ranges(by_rows ? m : n, jobs, 16, [&](std::size_t begin, std::size_t end) {
        const auto first = static_cast<std::ptrdiff_t>(begin);
        const int count = static_cast<int>(end - begin);
        const float* ap = f(a);
        const float* bp = f(b);
        float* cp = f(c);
        if (by_rows) {
            ap += ta ? first : first * lda;  // rows of op(A)
            cp += first * ldc;
        } else {
            bp += tb ? first * ldb : first;  // columns of op(B)
            cp += first;
        }
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    by_rows ? count : m, by_rows ? n : count, k, alpha, ap, lda, bp, ldb, beta, cp,
                    ldc);
    });
}

void CpuBackend::conv1d_impl(Queue&, const Conv1dShape& s, const DeviceBuffer& x,
                             const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    Timer t(*this, "conv1d");
    cpu::conv1d(s, f(x), f(w), bias ? f(bias) : nullptr, f(y));
}

void CpuBackend::conv_transpose1d_impl(Queue&, const Conv1dShape& s, const DeviceBuffer& x,
                                       const DeviceBuffer& w, const DeviceBuffer& bias,
                                       DeviceBuffer& y) {
    Timer t(*this, "conv_transpose1d");
    cpu::conv_transpose1d(s, f(x), f(w), bias ? f(bias) : nullptr, f(y));
}

void CpuBackend::layer_norm_impl(Queue&, int rows, int cols, float eps, const DeviceBuffer& x,
                                 const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                 DeviceBuffer& y) {
    Timer t(*this, "layer_norm");
    const float* xp = f(x);
    const float* g = f(gamma);
    const float* bt = f(beta);
    float* yp = f(y);
    for_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const float* row = xp + r * cols;
            double mean = 0, var = 0;
            for (int c = 0; c < cols; ++c) mean += row[c];
            mean /= cols;
            for (int c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
            var /= cols;
            const double inv = 1.0 / std::sqrt(var + eps);
            float* out = yp + r * cols;
            for (int c = 0; c < cols; ++c)
                out[c] = static_cast<float>((row[c] - mean) * inv) * g[c] + bt[c];
        }
    });
}

void CpuBackend::axpby_impl(Queue&, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
                            DeviceBuffer& y) {
    Timer t(*this, "axpby");
    for_elements(n, [&](std::size_t begin, std::size_t end) {
        const float* in = f(x) + begin;
        float* out = f(y) + begin;
        const std::size_t len = end - begin;
        // beta == 0 must not read y (it may hold NaN): a separate loop, not 0 * y.
        if (beta == 0.0f)
            for (std::size_t i = 0; i < len; ++i) out[i] = alpha * in[i];
        else
            for (std::size_t i = 0; i < len; ++i) out[i] = alpha * in[i] + beta * out[i];
    });
}

void CpuBackend::copy_rows_impl(Queue&, int rows, int cols, const DeviceBuffer& src,
                                std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                                std::size_t dst_offset, std::size_t dst_stride) {
    Timer t(*this, "copy_rows");
    if (rows <= 0 || cols <= 0) return;
    for_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r)
            std::memcpy(f(dst) + dst_offset + r * dst_stride, f(src) + src_offset + r * src_stride,
                        static_cast<std::size_t>(cols) * sizeof(float));
    });
}

void CpuBackend::copy_slot_rows_impl(Queue&, const SlotRows& s, const DeviceBuffer& index,
                                     bool from_slots, const DeviceBuffer& src, DeviceBuffer& dst) {
    Timer t(*this, from_slots ? "gather_slot_rows" : "scatter_slot_rows");
    const std::size_t cols = static_cast<std::size_t>(s.cols);
    for (int b = 0; b < s.items; ++b) {
        // The bodies' rule (kernel_bodies.h, copy_slot_rows_at): an index
        // outside the slots copies nothing.
        const float where = f(index)[b];
        if (!(where >= 0.0f && where < static_cast<float>(s.slots))) continue;
        const std::size_t slot = static_cast<std::size_t>(static_cast<int>(where));
        for (int r = 0; r < s.rows; ++r) {
            const std::size_t row = static_cast<std::size_t>(r);
            const std::size_t in_slot = s.slot_at + slot * s.slot_floats + row * s.slot_stride;
            const std::size_t in_batch =
                s.batch_at +
                (static_cast<std::size_t>(b) * static_cast<std::size_t>(s.rows) + row) *
                    s.batch_stride;
            std::memcpy(f(dst) + (from_slots ? in_batch : in_slot),
                        f(src) + (from_slots ? in_slot : in_batch), cols * sizeof(float));
        }
    }
}

void CpuBackend::transpose_impl(Queue&, int rows, int cols, const DeviceBuffer& x,
                                DeviceBuffer& y) {
    Timer t(*this, "transpose");
    const float* in = f(x);
    float* out = f(y);
    // Square tiles keep both the reads and the strided writes within a few
    // cache lines per row of the tile.
    constexpr int kTile = 32;
    for (int r0 = 0; r0 < rows; r0 += kTile)
        for (int c0 = 0; c0 < cols; c0 += kTile) {
            const int r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
            for (int r = r0; r < r1; ++r)
                for (int c = c0; c < c1; ++c)
                    out[static_cast<std::size_t>(c) * rows + r] =
                        in[static_cast<std::size_t>(r) * cols + c];
        }
}

void CpuBackend::add_bias_impl(Queue&, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                               DeviceBuffer& y) {
    Timer t(*this, "add_bias");
    const float* b = f(bias);
    for (int r = 0; r < rows; ++r) {
        float* row = f(y) + static_cast<std::size_t>(r) * cols;
        if (per_row) {
            const float v = b[r];
            for (int c = 0; c < cols; ++c) row[c] += v;
        } else {
            for (int c = 0; c < cols; ++c) row[c] += b[c];
        }
    }
}

void CpuBackend::polar_spectrum_impl(Queue&, int frames, int bins, float max_magnitude,
                                     const DeviceBuffer& x, DeviceBuffer& y) {
    Timer t(*this, "polar_spectrum");
    for (int fr = 0; fr < frames; ++fr) {
        const float* logmag = f(x) + static_cast<std::size_t>(fr) * 2 * bins;
        const float* phase = logmag + bins;
        float* out = f(y) + static_cast<std::size_t>(fr) * 2 * bins;
        cpu::polar(logmag, phase, max_magnitude, out, static_cast<std::size_t>(bins));
    }
}

CpuBackend::FftPlans& CpuBackend::plans(int n) {
    std::lock_guard lock(plans_mu_);
    auto& p = plans_[n];
    if (!p) {
        p = std::make_unique<FftPlans>();
        std::vector<float> re(static_cast<std::size_t>(n));
        std::vector<std::complex<float>> cx(static_cast<std::size_t>(n / 2 + 1));
        std::lock_guard fftw_lock(dsp::fftw_planner_mutex());
        // New-array execution on any buffer: plan unaligned, estimate only.
        const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
        p->forward =
            fftwf_plan_dft_r2c_1d(n, re.data(), reinterpret_cast<fftwf_complex*>(cx.data()), flags);
        p->inverse = fftwf_plan_dft_c2r_1d(n, reinterpret_cast<fftwf_complex*>(cx.data()),
                                           re.data(), flags | FFTW_DESTROY_INPUT);
    }
    return *p;
}

void CpuBackend::rfft_impl(Queue&, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    Timer t(*this, "rfft");
    auto& p = plans(n);
    for (int b = 0; b < batch; ++b)
        fftwf_execute_dft_r2c(p.forward, f(in) + static_cast<std::size_t>(b) * n,
                              reinterpret_cast<fftwf_complex*>(
                                  f(out) + static_cast<std::size_t>(b) * (n / 2 + 1) * 2));
}

void CpuBackend::irfft_impl(Queue&, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    Timer t(*this, "irfft");
    auto& p = plans(n);
    const std::size_t bins = static_cast<std::size_t>(n / 2 + 1);
    std::vector<float> scratch(bins * 2);  // c2r destroys its input
    const float scale = 1.0f / static_cast<float>(n);
    for (int b = 0; b < batch; ++b) {
        std::memcpy(scratch.data(), f(in) + b * bins * 2, bins * 2 * sizeof(float));
        float* o = f(out) + static_cast<std::size_t>(b) * n;
        fftwf_execute_dft_c2r(p.inverse, reinterpret_cast<fftwf_complex*>(scratch.data()), o);
        for (int i = 0; i < n; ++i) o[i] *= scale;
    }
}

void CpuBackend::frame_signal_impl(Queue&, const DeviceBuffer& signal, int n_fft, int hop,
                                   int n_frames, const DeviceBuffer& window, DeviceBuffer& frames) {
    Timer t(*this, "frame_signal");
    for (int fr = 0; fr < n_frames; ++fr)
        for (int i = 0; i < n_fft; ++i)
            f(frames)[static_cast<std::size_t>(fr) * n_fft + i] =
                f(signal)[static_cast<std::size_t>(fr) * hop + i] * f(window)[i];
}

void CpuBackend::overlap_add_impl(Queue&, const DeviceBuffer& frames, int n_fft, int hop,
                                  int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    Timer t(*this, "overlap_add");
    const std::size_t len = static_cast<std::size_t>(n_frames - 1) * hop + n_fft;
    std::fill(f(out), f(out) + len, 0.0f);
    for (int fr = 0; fr < n_frames; ++fr)
        for (int i = 0; i < n_fft; ++i)
            f(out)[static_cast<std::size_t>(fr) * hop + i] +=
                f(frames)[static_cast<std::size_t>(fr) * n_fft + i] * f(window)[i];
}

void CpuBackend::complex_multiply_impl(Queue&, const DeviceBuffer& a, const DeviceBuffer& b,
                                       DeviceBuffer& c, std::size_t n) {
    Timer t(*this, "complex_multiply");
    for (std::size_t i = 0; i < n; ++i) {
        const float ar = f(a)[2 * i], ai = f(a)[2 * i + 1], br = f(b)[2 * i], bi = f(b)[2 * i + 1];
        f(c)[2 * i] = ar * br - ai * bi;
        f(c)[2 * i + 1] = ar * bi + ai * br;
    }
}

void CpuBackend::complex_exp_impl(Queue&, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n) {
    Timer t(*this, "complex_exp");
    for (std::size_t i = 0; i < n; ++i) {
        const float m = std::exp(f(x)[2 * i]), ph = f(x)[2 * i + 1];
        f(y)[2 * i] = m * std::cos(ph);
        f(y)[2 * i + 1] = m * std::sin(ph);
    }
}

void CpuBackend::gated_tanh_impl(Queue&, int batch, int channels, int length, const DeviceBuffer& x,
                                 DeviceBuffer& y) {
    Timer t(*this, "gated_tanh");
    const std::size_t n = static_cast<std::size_t>(channels) * static_cast<std::size_t>(length);
    const float* in = f(x);
    float* out = f(y);
    // The vector loop of cpu_vector_math.h, not the scalar kernel body: the
    // same formula through libmvec's SIMD tanh and exp, over the outputs
    // [batch][n], each range cut where an item ends (item i's tanh half
    // starts at 2 i n, its sigmoid half n on).
    for_elements(n * static_cast<std::size_t>(batch), [&](std::size_t begin, std::size_t end) {
        while (begin < end) {
            const std::size_t item = begin / n, stop = std::min(end, (item + 1) * n);
            const float* tanh_half = in + item * 2 * n + (begin - item * n);
            cpu::gated_tanh(tanh_half, tanh_half + n, out + begin, stop - begin);
            begin = stop;
        }
    });
}

void CpuBackend::softmax_rows_impl(Queue&, int rows, int cols, const DeviceBuffer& x,
                                   DeviceBuffer& y) {
    Timer t(*this, "softmax_rows");
    for_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const float* in = f(x) + r * cols;
            float* out = f(y) + r * cols;
            const float top = *std::max_element(in, in + cols);
            // Arguments held at -87 and their exp (1.6e-38) then made 0:
            // libmvec's vector exp takes a scalar path, many times slower,
            // for a vector with any argument past float's range, as every
            // padded key's -1e4 (relative_attention_scores) is; what it
            // would give there is a denormal or 0, against a sum of at
            // least 1.
            for (int c = 0; c < cols; ++c) out[c] = std::max(in[c] - top, -87.0f);
            cpu::exp(out, out, static_cast<std::size_t>(cols));
            for (int c = 0; c < cols; ++c) out[c] = out[c] < 1.7e-38f ? 0.0f : out[c];
            // The sum in double: a row of hundreds of terms then rounds once.
            double sum = 0;
            for (int c = 0; c < cols; ++c) sum += out[c];
            const float inv_sum = static_cast<float>(1.0 / sum);
            for (int c = 0; c < cols; ++c) out[c] *= inv_sum;
        }
    });
}

// The attention's products as single-threaded SGEMMs, one sentence's head
// per job, each head's columns read in place (lda = heads * channels); the
// band through a [length][2*window + 1] product of its own. A padded key's
// score is written after the products (-1e4, as the shared body).
void CpuBackend::relative_attention_scores_impl(Queue&, int batch, int heads, int length,
                                                int channels, int window, float scale,
                                                const DeviceBuffer& queries,
                                                const DeviceBuffer& keys, const DeviceBuffer& rel_k,
                                                const DeviceBuffer& key_mask,
                                                DeviceBuffer& scores) {
    Timer t(*this, "relative_attention_scores");
    const int width = heads * channels, rel = 2 * window + 1;
    const std::size_t n = static_cast<std::size_t>(length);
    cpu::parallel_for(batch * heads, [&](int job) {
        const int b = job / heads, h = job % heads;
        const std::size_t first = static_cast<std::size_t>(b) * n;
        const float* qh = f(queries) + first * width + static_cast<std::size_t>(h) * channels;
        const float* kh = f(keys) + first * width + static_cast<std::size_t>(h) * channels;
        float* s = f(scores) + static_cast<std::size_t>(job) * n * n;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, length, length, channels, scale, qh,
                    width, kh, width, 0.0f, s, length);
        float* band = cpu::job_scratch(n * rel);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, length, rel, channels, scale, qh,
                    width, f(rel_k), channels, 0.0f, band, rel);
        for (int i = 0; i < length; ++i)
            for (int r = std::max(0, window - i); r < rel && i + r - window < length; ++r)
                s[static_cast<std::size_t>(i) * n + i + r - window] +=
                    band[static_cast<std::size_t>(i) * rel + r];
        if (!key_mask) return;
        const float* mask = f(key_mask) + first;
        for (int j = 0; j < length; ++j)
            if (mask[j] == 0.0f)
                for (int i = 0; i < length; ++i) s[static_cast<std::size_t>(i) * n + j] = -1e4f;
    });
}

void CpuBackend::relative_attention_values_impl(Queue&, int batch, int heads, int length,
                                                int channels, int window, const DeviceBuffer& p,
                                                const DeviceBuffer& values,
                                                const DeviceBuffer& rel_v, DeviceBuffer& y) {
    Timer t(*this, "relative_attention_values");
    const int width = heads * channels, rel = 2 * window + 1;
    const std::size_t n = static_cast<std::size_t>(length);
    cpu::parallel_for(batch * heads, [&](int job) {
        const int b = job / heads, h = job % heads;
        const std::size_t first = static_cast<std::size_t>(b) * n;
        const float* ph = f(p) + static_cast<std::size_t>(job) * n * n;
        float* yh = f(y) + first * width + static_cast<std::size_t>(h) * channels;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, length, channels, length, 1.0f, ph,
                    length, f(values) + first * width + static_cast<std::size_t>(h) * channels,
                    width, 0.0f, yh, width);
        // The probabilities on the band, by offset (0 off the ends).
        float* band = cpu::job_scratch(n * rel);
        for (int i = 0; i < length; ++i)
            for (int r = 0; r < rel; ++r) {
                const int j = i + r - window;
                band[static_cast<std::size_t>(i) * rel + r] =
                    j >= 0 && j < length ? ph[static_cast<std::size_t>(i) * n + j] : 0.0f;
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, length, channels, rel, 1.0f, band,
                    rel, f(rel_v), channels, 1.0f, yh, width);
    });
}

void CpuBackend::broadcast_multiply_impl(Queue&, int rows, int cols, const DeviceBuffer& factors,
                                         bool per_row, DeviceBuffer& y) {
    Timer t(*this, "broadcast_multiply");
    const float* m = f(factors);
    for_rows(rows, cols, [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            float* row = f(y) + r * cols;
            if (per_row) {
                const float v = m[r];
                for (int c = 0; c < cols; ++c) row[c] *= v;
            } else {
                for (int c = 0; c < cols; ++c) row[c] *= m[c];
            }
        }
    });
}

// The shared body as host C++ (gpu/kernels/spline_bodies.h), so every
// backend inverts the spline in the same float steps.
void CpuBackend::spline_inverse_impl(Queue&, int count, int bins, float bound, float scale,
                                     const DeviceBuffer& params, const DeviceBuffer& x,
                                     DeviceBuffer& y) {
    Timer t(*this, "spline_inverse");
    for_rows(count, 3 * bins, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i)
            bodies::spline_inverse_at(i, bins, bound, scale, f(params), f(x), f(y));
    });
}

void CpuBackend::minimum_phase_fold_impl(Queue&, int n, int batch, const DeviceBuffer& x,
                                         DeviceBuffer& y) {
    Timer t(*this, "minimum_phase_fold");
    for (int b = 0; b < batch; ++b) {
        const float* in = f(x) + static_cast<std::size_t>(b) * n;
        float* out = f(y) + static_cast<std::size_t>(b) * n;
        for (int i = 0; i < n; ++i) {
            float v;
            if (i == 0 || i == n / 2)
                v = in[i];
            else if (i < n / 2)
                v = 2.0f * in[i];
            else
                v = 0.0f;
            out[i] = v;
        }
    }
}

std::vector<KernelTiming> CpuBackend::kernel_timings() const {
    std::lock_guard lock(timing_mu_);
    std::vector<KernelTiming> out;
    for (const auto& [k, v] : timings_) out.push_back(v);
    return out;
}

void CpuBackend::reset_timings() {
    std::lock_guard lock(timing_mu_);
    timings_.clear();
}

}  // namespace etude::gpu
