// CudaBackend: see cuda_backend.h. Host code only: calls into the CUDA
// runtime, cuFFT and cuBLAS, compiled by the C++ compiler (nvcc's
// per-architecture passes over it took about 18 s of the module's 30 s
// build, for nothing); the kernels it launches are in cuda_kernels.cu.
//
// Per queue (a non-blocking stream): a lazily created cuBLAS handle, cuFFT
// plans with their scratch memory and a pool of timing events. Keeping these per queue rather than
// per backend is what makes queues independent: a cuFFT plan owns one work area, and two streams
// running the same plan at once would share it.
#include "gpu/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/cuda/cuda_handles.h"
#include "gpu/cuda/cuda_kernels.h"
#include "gpu/kernel_timing_table.h"

namespace etude::gpu {
namespace {

using cuda::CublasHandle;
using cuda::cufft_error_name;
using cuda::DeviceMemory;
using cuda::Event;
using cuda::FftPlan;
using cuda::Graph;
using cuda::GraphExec;
using cuda::Stream;

std::string version_string(int v) {
    // CUDA encodes versions as 1000*major + 10*minor.
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

inline float* fp(const DeviceBuffer& b) {
    return static_cast<float*>(b.handle());
}

struct TimedOp {
    const char* name;  // always a string literal or to_string(): static storage
    Event start, stop;
};

struct FftEntry {
    FftPlan forward, inverse;
    // C2R overwrites its input, so irfft transforms a copy: one buffer per
    // plan, allocated with it.
    DeviceMemory scratch;
};

class CudaQueue final : public Queue {
  public:
    CudaQueue(const void* owner, int device, Stream stream)
        : owner(owner), device(device), stream(std::move(stream)) {}
    ~CudaQueue() override {
        // Work still queued may use the plans, scratch and events below.
        cudaSetDevice(device);
        cudaStreamSynchronize(stream.get());
    }

    const void* owner;
    int device;
    // Declared first so that it is destroyed last, after everything using it.
    Stream stream;
    CublasHandle blas;
    std::map<std::pair<int, int>, FftEntry> ffts;  // (n, batch)
    std::vector<Event> spare_events;
    std::deque<TimedOp> pending;  // recorded, not yet read
};

// Bounds the events in flight on a queue that is never synchronized.
constexpr std::size_t kMaxPendingTimings = 4096;

}  // namespace

// ---------------------------------------------------------------------------

struct CudaBackend::Impl {
    explicit Impl(CudaBackend& self) : self(self) {}

    CudaBackend& self;
    int device = 0;  // CUDA ordinal; set once by the constructor
    DeviceInfo info;
    KernelTimingTable timings;

    // Every CUDA, cuFFT and cuBLAS call goes through one of these.
    void check(cudaError_t e, const char* call, const char* op) {
        if (e == cudaSuccess) return;
        cudaGetLastError();  // clear a non-sticky error so later launch checks are not confused
        self.fail(std::string("CUDA ") + call + ": " + cudaGetErrorString(e) + " while " + op);
    }
    void check(cufftResult r, const char* call, const char* op) {
        if (r == CUFFT_SUCCESS) return;
        if (r == CUFFT_ALLOC_FAILED)
            throw OutOfMemory(std::string("CUDA ") + call + ": " + cufft_error_name(r) + " while " +
                              op);
        self.fail(std::string("CUDA ") + call + ": " + cufft_error_name(r) + " while " + op);
    }
    void check(cublasStatus_t s, const char* call, const char* op) {
        if (s == CUBLAS_STATUS_SUCCESS) return;
        if (s == CUBLAS_STATUS_ALLOC_FAILED)
            throw OutOfMemory(std::string("CUDA ") + call + ": " + cublasGetStatusString(s) +
                              " while " + op);
        self.fail(std::string("CUDA ") + call + ": " + cublasGetStatusString(s) + " while " + op);
    }

    // The current device is per host thread; any thread may call us.
    void use_device(const char* op) { check(cudaSetDevice(device), "cudaSetDevice", op); }

    CudaQueue& queue(Queue& q) const {
        auto* cq = dynamic_cast<CudaQueue*>(&q);
        if (!cq || cq->owner != this)
            throw std::invalid_argument("CUDA backend: a queue from another backend was passed");
        return *cq;
    }

    // Reads the timings of finished ops in order, stopping at the first that
    // is still running (or at all of them after a synchronize).
    void harvest(CudaQueue& q) {
        while (!q.pending.empty()) {
            TimedOp& op = q.pending.front();
            const cudaError_t ready = cudaEventQuery(op.stop.get());
            if (ready == cudaErrorNotReady) {
                cudaGetLastError();  // "not ready" is a status, not an error to keep
                return;
            }
            check(ready, "cudaEventQuery", "reading kernel timings");
            float ms = 0.0f;
            check(cudaEventElapsedTime(&ms, op.start.get(), op.stop.get()), "cudaEventElapsedTime",
                  "reading kernel timings");
            timings.record(op.name, ms);
            q.spare_events.push_back(std::move(op.start));
            q.spare_events.push_back(std::move(op.stop));
            q.pending.pop_front();
        }
    }

    Event take_event(CudaQueue& q, const char* op) {
        if (!q.spare_events.empty()) {
            Event e = std::move(q.spare_events.back());
            q.spare_events.pop_back();
            return e;
        }
        cudaEvent_t e = nullptr;
        check(cudaEventCreate(&e), "cudaEventCreate", op);
        return Event(e);
    }

    FftEntry& fft(CudaQueue& q, int n, int batch) { return q.ffts[{n, batch}]; }

    cublasHandle_t blas(CudaQueue& q) {
        if (!q.blas) {
            cublasHandle_t h = nullptr;
            check(cublasCreate(&h), "cublasCreate", "gemm");
            q.blas.reset(h);
            check(cublasSetStream(h, q.stream.get()), "cublasSetStream", "gemm");
            // The default math mode computes in full FP32 (no TF32 tensor
            // cores), which the 1e-4 parity with the CPU's SGEMM relies on.
            check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", "gemm");
        }
        return q.blas.get();
    }
};

void CudaBackend::fail(const std::string& what) {
    mark_failed(what);
    throw DeviceError(what);
}

// One operation on a queue: applies an injected fault, makes the device
// current and, when profiling, brackets the work with a pair of timing
// events. done() files
// the pair for synchronize() to read; an op that throws before done() just
// returns its events to the pool.
class CudaBackend::Op {
  public:
    Op(CudaBackend& b, Queue& q, const char* name)
        : impl_(*b.impl_), q_(impl_.queue(q)), name_(name) {
        const double late_ms = b.consume_fault(name);
        if (late_ms > 0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
        impl_.use_device(name);
        // Inside a recording nothing is timed: an event there would be a
        // node of the graph, never read.
        if (!b.profiling() || q.recording()) return;
        if (q_.pending.size() >= kMaxPendingTimings) impl_.harvest(q_);
        if (q_.pending.size() >= kMaxPendingTimings) return;  // still busy: skip timing this op
        start_ = impl_.take_event(q_, name);
        stop_ = impl_.take_event(q_, name);
        impl_.check(cudaEventRecord(start_.get(), q_.stream.get()), "cudaEventRecord", name);
    }
    ~Op() {
        if (start_) q_.spare_events.push_back(std::move(start_));
        if (stop_) q_.spare_events.push_back(std::move(stop_));
    }
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;

    CudaQueue& queue() const { return q_; }
    cudaStream_t stream() const { return q_.stream.get(); }
    const char* name() const { return name_; }
    template <typename Status>
    void check(Status s, const char* call) {
        impl_.check(s, call, name_);
    }

    void done() {
        if (!start_) return;
        impl_.check(cudaEventRecord(stop_.get(), q_.stream.get()), "cudaEventRecord", name_);
        q_.pending.push_back(TimedOp{name_, std::move(start_), std::move(stop_)});
    }

  private:
    Impl& impl_;
    CudaQueue& q_;
    const char* name_;
    Event start_, stop_;
};

// ---------------------------------------------------------------------------

DeviceInfo CudaBackend::describe(int ordinal) {
    auto check = [&](cudaError_t e, const char* call) {
        if (e != cudaSuccess) {
            cudaGetLastError();
            throw DeviceError(std::string("CUDA ") + call + ": " + cudaGetErrorString(e) +
                              " while describing device " + std::to_string(ordinal));
        }
    };
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
    int runtime = 0, driver = 0;
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");

    DeviceInfo info;
    info.kind = BackendKind::Cuda;
    info.index = ordinal;  // the caller renumbers among supported devices
    info.name = p.name;
    info.vendor = "NVIDIA";
    info.platform = "CUDA " + version_string(runtime);
    info.driver = version_string(driver);
    info.global_memory = p.totalGlobalMem;
    info.compute_units = p.multiProcessorCount;
    info.is_gpu = true;
    info.capabilities = {"sm_" + std::to_string(p.major) + std::to_string(p.minor), "fft", "gemm",
                         "profiling", "fp64"};
    return info;
}

CudaBackend::CudaBackend(int index) : impl_(std::make_unique<Impl>(*this)) {
    int count = 0;
    impl_->check(cudaGetDeviceCount(&count), "cudaGetDeviceCount", "opening the device");
    // `index` counts only the GPUs this build supports, as
    // etude_cuda_list_devices lists them: the module carries code for sm_80
    // and sm_90 (plus PTX for newer GPUs), and an older GPU would only fail
    // at its first kernel launch.
    std::vector<int> ordinals;
    for (int i = 0; i < count; ++i) {
        int major = 0;
        impl_->check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i),
                     "cudaDeviceGetAttribute", "opening the device");
        if (major >= 8) ordinals.push_back(i);
    }
    if (index < 0 || index >= static_cast<int>(ordinals.size()))
        throw DeviceError("CUDA: there is no device " + std::to_string(index) + "; found " +
                          std::to_string(ordinals.size()) + " (sm_80 or newer)");
    impl_->device = ordinals[static_cast<std::size_t>(index)];
    impl_->info = describe(impl_->device);
    impl_->info.index = index;
    impl_->use_device("opening the device");
    // Creates the primary context now, so that a broken driver shows up
    // here rather than in the first operation.
    impl_->check(cudaFree(nullptr), "cudaFree", "opening the device");
}

CudaBackend::~CudaBackend() = default;

const DeviceInfo& CudaBackend::info() const {
    return impl_->info;
}

// ---- memory ----

void* CudaBackend::raw_allocate(std::size_t bytes) {
    consume_fault("allocate");
    impl_->use_device("allocate");
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(bytes, 1));
    if (e == cudaErrorMemoryAllocation) {
        // Not a device failure: the caller (a pool) can free memory and retry.
        cudaGetLastError();
        throw OutOfMemory("CUDA cudaMalloc: out of memory while allocating " +
                          std::to_string(bytes) + " bytes");
    }
    impl_->check(e, "cudaMalloc", "allocate");
    return p;
}

void CudaBackend::raw_free(void* handle) noexcept {
    if (!handle) return;
    // No error reporting from here (noexcept, often in destructors); a
    // broken context shows up in the next operation instead.
    cudaSetDevice(impl_->device);
    cudaFree(handle);
}

float* CudaBackend::allocate_pinned(std::size_t floats) {
    consume_fault("allocate");
    impl_->use_device("allocate_pinned");
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, std::max<std::size_t>(floats, 1) * sizeof(float));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw OutOfMemory("CUDA cudaMallocHost: out of memory while allocating " +
                          std::to_string(floats) + " pinned floats");
    }
    impl_->check(e, "cudaMallocHost", "allocate_pinned");
    return static_cast<float*>(p);
}

void CudaBackend::free_pinned(float* p) noexcept {
    if (p) cudaFreeHost(p);
}

// ---- queues, copies, synchronisation ----

std::unique_ptr<Queue> CudaBackend::create_queue() {
    impl_->use_device("create_queue");
    cudaStream_t s = nullptr;
    // Non-blocking: no implicit ordering with the legacy default stream, which
    // other libraries in the process may use.
    impl_->check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
                 "create_queue");
    return std::make_unique<CudaQueue>(impl_.get(), impl_->device, Stream(s));
}

void CudaBackend::copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset,
                                      const float* src, std::size_t floats) {
    Op op(*this, q, "h2d");
    if (floats > 0)
        op.check(cudaMemcpyAsync(fp(dst) + dst_offset, src, floats * sizeof(float),
                                 cudaMemcpyHostToDevice, op.stream()),
                 "cudaMemcpyAsync");
    op.done();
}

void CudaBackend::copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src,
                                    std::size_t src_offset, std::size_t floats) {
    Op op(*this, q, "d2h");
    if (floats > 0)
        op.check(cudaMemcpyAsync(dst, fp(src) + src_offset, floats * sizeof(float),
                                 cudaMemcpyDeviceToHost, op.stream()),
                 "cudaMemcpyAsync");
    op.done();
}

// Like the CPU reference, fill is bookkeeping rather than an op: no fault
// injection, no timing entry.
void CudaBackend::fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) {
    CudaQueue& cq = impl_->queue(q);
    impl_->use_device("fill");
    impl_->check(kernels::fill(cq.stream.get(), fp(dst), value, floats), "fill kernel launch",
                 "fill");
}

void CudaBackend::synchronize(Queue& q) {
    refuse_while_recording(q, "synchronize");
    CudaQueue& cq = impl_->queue(q);
    impl_->use_device("synchronize");
    impl_->check(cudaStreamSynchronize(cq.stream.get()), "cudaStreamSynchronize", "synchronize");
    impl_->harvest(cq);
}

// ---- kernels ----

void CudaBackend::activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                  std::size_t n, float alpha) {
    Op op(*this, q, to_string(f));
    op.check(kernels::activation(op.stream(), f, fp(x), fp(y), n, alpha), "kernel launch");
    op.done();
}

void CudaBackend::gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                            const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb,
                            float beta, DeviceBuffer& c, int ldc) {
    Op op(*this, q, "gemm");
    if (m > 0 && n > 0) {
        // cuBLAS is column-major. A row-major matrix with row stride ld is
        // its transpose in column-major with the same ld, so row-major
        // C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
        // operands and the m/n sizes, keep each operand's transpose flag.
        cublasHandle_t h = impl_->blas(op.queue());
        op.check(
            cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                        n, m, k, &alpha, fp(b), ldb, fp(a), lda, &beta, fp(c), ldc),
            "cublasSgemm");
    }
    op.done();
}

void CudaBackend::conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                              const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    Op op(*this, q, "conv1d");
    op.check(kernels::conv1d(op.stream(), s, fp(x), fp(w), bias ? fp(bias) : nullptr, fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                        const DeviceBuffer& w, const DeviceBuffer& bias,
                                        DeviceBuffer& y) {
    Op op(*this, q, "conv_transpose1d");
    op.check(
        kernels::conv_transpose1d(op.stream(), s, fp(x), fp(w), bias ? fp(bias) : nullptr, fp(y)),
        "kernel launch");
    op.done();
}

void CudaBackend::layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                  const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                  DeviceBuffer& y) {
    Op op(*this, q, "layer_norm");
    op.check(kernels::layer_norm(op.stream(), rows, cols, eps, fp(x), fp(gamma), fp(beta), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x,
                             float beta, DeviceBuffer& y) {
    Op op(*this, q, "axpby");
    op.check(kernels::axpby(op.stream(), n, alpha, fp(x), beta, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                 std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                                 std::size_t dst_offset, std::size_t dst_stride) {
    Op op(*this, q, "copy_rows");
    if (rows > 0 && cols > 0) {
        op.check(cudaMemcpy2DAsync(
                     fp(dst) + dst_offset, dst_stride * sizeof(float), fp(src) + src_offset,
                     src_stride * sizeof(float), static_cast<std::size_t>(cols) * sizeof(float),
                     static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, op.stream()),
                 "cudaMemcpy2DAsync");
    }
    op.done();
}

void CudaBackend::transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                 DeviceBuffer& y) {
    Op op(*this, q, "transpose");
    op.check(kernels::transpose(op.stream(), rows, cols, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias,
                                bool per_row, DeviceBuffer& y) {
    Op op(*this, q, "add_bias");
    op.check(kernels::add_bias(op.stream(), rows, cols, fp(bias), per_row, fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                      const DeviceBuffer& x, DeviceBuffer& y) {
    Op op(*this, q, "polar_spectrum");
    op.check(kernels::polar_spectrum(op.stream(), frames, bins, max_magnitude, fp(x), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) {
    Op op(*this, q, "rfft");
    if (n <= 0 || batch <= 0) return op.done();
    FftEntry& e = impl_->fft(op.queue(), n, batch);
    if (!e.forward) {
        // Basic (contiguous) layout: null embeds make cuFFT ignore the
        // strides and distances, which is exactly [batch][n] -> [batch][n/2+1].
        cufftHandle h = 0;
        op.check(cufftPlanMany(&h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, batch),
                 "cufftPlanMany");
        e.forward = FftPlan(h);
        op.check(cufftSetStream(h, op.stream()), "cufftSetStream");
    }
    op.check(cufftExecR2C(e.forward.get(), fp(in), reinterpret_cast<cufftComplex*>(fp(out))),
             "cufftExecR2C");
    op.done();
}

void CudaBackend::irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                             DeviceBuffer& out) {
    Op op(*this, q, "irfft");
    if (n <= 0 || batch <= 0) return op.done();
    const std::size_t bins = static_cast<std::size_t>(n / 2 + 1);
    const std::size_t spectrum_floats = static_cast<std::size_t>(batch) * bins * 2;
    FftEntry& e = impl_->fft(op.queue(), n, batch);
    if (!e.inverse) {
        cufftHandle h = 0;
        op.check(cufftPlanMany(&h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_C2R, batch),
                 "cufftPlanMany");
        e.inverse = FftPlan(h);
        op.check(cufftSetStream(h, op.stream()), "cufftSetStream");
        void* p = nullptr;
        const cudaError_t err = cudaMalloc(&p, spectrum_floats * sizeof(float));
        if (err == cudaErrorMemoryAllocation) {
            cudaGetLastError();
            e.inverse = FftPlan();  // retry the whole setup next time
            throw OutOfMemory("CUDA cudaMalloc: out of memory while irfft");
        }
        op.check(err, "cudaMalloc");
        e.scratch.reset(p);
    }
    // The caller's spectrum is const: transform a copy.
    op.check(cudaMemcpyAsync(e.scratch.get(), fp(in), spectrum_floats * sizeof(float),
                             cudaMemcpyDeviceToDevice, op.stream()),
             "cudaMemcpyAsync");
    op.check(kernels::hermitian_edges(op.stream(), batch, n, static_cast<float*>(e.scratch.get())),
             "kernel launch");
    op.check(cufftExecC2R(e.inverse.get(), static_cast<cufftComplex*>(e.scratch.get()), fp(out)),
             "cufftExecC2R");
    // cuFFT's inverse is unnormalised; the interface promises 1/n.
    op.check(kernels::scale(op.stream(), fp(out), 1.0f / static_cast<float>(n),
                            static_cast<std::size_t>(batch) * n),
             "kernel launch");
    op.done();
}

void CudaBackend::frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                    int n_frames, const DeviceBuffer& window,
                                    DeviceBuffer& frames) {
    Op op(*this, q, "frame_signal");
    if (n_fft <= 0 || n_frames <= 0) return op.done();
    op.check(kernels::frame_signal(op.stream(), fp(signal), n_fft, hop, n_frames, fp(window),
                                   fp(frames)),
             "kernel launch");
    op.done();
}

void CudaBackend::overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                   int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    Op op(*this, q, "overlap_add");
    if (n_fft <= 0 || n_frames <= 0) return op.done();
    op.check(
        kernels::overlap_add(op.stream(), fp(frames), n_fft, hop, n_frames, fp(window), fp(out)),
        "kernel launch");
    op.done();
}

void CudaBackend::complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                        DeviceBuffer& c, std::size_t n) {
    Op op(*this, q, "complex_multiply");
    op.check(kernels::complex_multiply(op.stream(), fp(a), fp(b), fp(c), n), "kernel launch");
    op.done();
}

void CudaBackend::complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                   std::size_t n) {
    Op op(*this, q, "complex_exp");
    op.check(kernels::complex_exp(op.stream(), fp(x), fp(y), n), "kernel launch");
    op.done();
}

void CudaBackend::minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                          DeviceBuffer& y) {
    Op op(*this, q, "minimum_phase_fold");
    op.check(kernels::minimum_phase_fold(op.stream(), n, batch, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::gated_tanh_impl(Queue& q, int channels, int length, const DeviceBuffer& x,
                                  DeviceBuffer& y) {
    Op op(*this, q, "gated_tanh");
    op.check(kernels::gated_tanh(op.stream(), channels, length, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                    DeviceBuffer& y) {
    Op op(*this, q, "softmax_rows");
    op.check(kernels::softmax_rows(op.stream(), rows, cols, fp(x), fp(y)), "kernel launch");
    op.done();
}

void CudaBackend::relative_attention_scores_impl(
    Queue& q, int batch, int heads, int length, int channels, int window, float scale,
    const DeviceBuffer& queries, const DeviceBuffer& keys, const DeviceBuffer& rel_k,
    const DeviceBuffer& key_mask, DeviceBuffer& scores) {
    Op op(*this, q, "relative_attention_scores");
    op.check(kernels::relative_attention_scores(op.stream(), batch, heads, length, channels, window,
                                                scale, fp(queries), fp(keys), fp(rel_k),
                                                key_mask ? fp(key_mask) : nullptr, fp(scores)),
             "kernel launch");
    op.done();
}

void CudaBackend::relative_attention_values_impl(Queue& q, int batch, int heads, int length,
                                                 int channels, int window, const DeviceBuffer& p,
                                                 const DeviceBuffer& values,
                                                 const DeviceBuffer& rel_v, DeviceBuffer& y) {
    Op op(*this, q, "relative_attention_values");
    op.check(kernels::relative_attention_values(op.stream(), batch, heads, length, channels, window,
                                                fp(p), fp(values), fp(rel_v), fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::broadcast_multiply_impl(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                          bool per_row, DeviceBuffer& y) {
    Op op(*this, q, "broadcast_multiply");
    op.check(kernels::broadcast_multiply(op.stream(), rows, cols, fp(factors), per_row, fp(y)),
             "kernel launch");
    op.done();
}

void CudaBackend::spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                                      const DeviceBuffer& params, const DeviceBuffer& x,
                                      DeviceBuffer& y) {
    Op op(*this, q, "spline_inverse");
    op.check(
        kernels::spline_inverse(op.stream(), count, bins, bound, scale, fp(params), fp(x), fp(y)),
        "kernel launch");
    op.done();
}

// ---- profiling ----

// ---- recordings: CUDA graphs by stream capture ----
// What the ops put on a stream is capturable: the kernels of
// cuda_kernels.cu, cudaMemcpyAsync and cudaMemcpy2DAsync between device
// buffers, cublasSgemm (cuBLAS supports capture; since CUDA 12.2 its
// default workspace comes from cudaMallocAsync, which becomes a node of the
// graph, so no workspace need be set) and cufftExecR2C/C2R (cuFFT documents
// CUDA Graphs support for its execution calls). Host copies and
// synchronize are refused by gpu::Backend before they get here. What is
// not stream work, a cuFFT plan or the irfft scratch made on an FFT's first
// use, is made while capturing: the Relaxed capture mode allows it from
// this thread (Global mode refuses cudaMalloc). Plans and the cuBLAS handle
// belong to the queue and the graph uses them, hence a recording replays
// only on its own queue. Checked to compile here; not yet run on a GPU.
namespace {

struct CudaGraph final : RecordedWork {
    Graph graph;
    GraphExec exec;
};

}  // namespace

bool CudaBackend::begin_recording_impl(Queue& q) {
    CudaQueue& cq = impl_->queue(q);
    impl_->use_device("record");
    impl_->check(cudaStreamBeginCapture(cq.stream.get(), cudaStreamCaptureModeRelaxed),
                 "cudaStreamBeginCapture", "record");
    return true;
}

std::shared_ptr<RecordedWork> CudaBackend::end_recording_impl(Queue& q) {
    CudaQueue& cq = impl_->queue(q);
    impl_->use_device("record");
    auto work = std::make_shared<CudaGraph>();
    cudaGraph_t graph = nullptr;
    impl_->check(cudaStreamEndCapture(cq.stream.get(), &graph), "cudaStreamEndCapture", "record");
    work->graph.reset(graph);
    cudaGraphExec_t exec = nullptr;
    impl_->check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate", "record");
    work->exec.reset(exec);
    return work;
}

void CudaBackend::abort_recording_impl(Queue& q) noexcept {
    auto* cq = dynamic_cast<CudaQueue*>(&q);
    if (!cq) return;
    cudaSetDevice(impl_->device);
    cudaGraph_t graph = nullptr;
    // Ends the capture whatever state an error left it in; nothing ran.
    if (cudaStreamEndCapture(cq->stream.get(), &graph) == cudaSuccess && graph)
        cudaGraphDestroy(graph);
    cudaGetLastError();
}

void CudaBackend::replay_impl(Queue& q, const std::shared_ptr<RecordedWork>& work) {
    auto* graph = dynamic_cast<const CudaGraph*>(work.get());
    if (!graph) throw std::invalid_argument("replay: not a CUDA recording");
    Op op(*this, q, "replay");
    op.check(cudaGraphLaunch(graph->exec.get(), op.stream()), "cudaGraphLaunch");
    op.done();
}

std::vector<KernelTiming> CudaBackend::kernel_timings() const {
    return impl_->timings.snapshot();
}

void CudaBackend::reset_timings() {
    impl_->timings.clear();
}

}  // namespace etude::gpu
