// CudaBackend: see cuda_backend.h. Host code only: calls into the CUDA
// runtime, cuFFT and cuBLAS, compiled by the C++ compiler (nvcc's
// per-architecture passes over it took about 18 s of the module's 30 s
// build, for nothing); the kernels it launches are in cuda_kernels.cu.
//
// Per queue (a non-blocking stream): a lazily created cuBLAS handle, cuFFT
// plans with their scratch memory and a pool of timing events. Keeping these per queue rather than
// per backend is what makes queues independent: a cuFFT plan owns one work area, and two streams
// running the same plan at once would share it. The kernel operations are in
// cuda_ops.cpp, what both files share in cuda_backend_state.h.
#include "gpu/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_backend_state.h"
#include "gpu/cuda/cuda_conv_gemm.h"
#include "gpu/cuda/cuda_kernels.h"

namespace etude::gpu {

void CudaBackend::fail(const std::string& what) {
    mark_failed(what);
    throw DeviceError(what);
}

// ---------------------------------------------------------------------------

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
    impl_->conv_as_gemm = cuda::keep_pool_scratch(impl_->device);
    if (const char* c = std::getenv("ETUDE_CUDA_CONV"); c && std::string(c) == "direct")
        impl_->conv_as_gemm = false;
}

bool CudaBackend::set_math_precision(MathPrecision p) {
    impl_->precision = p;
    return true;
}

MathPrecision CudaBackend::math_precision() const {
    return impl_->precision.load();
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
    // broken context shows up in the next operation instead. cudaFree
    // synchronizes the device, which would spoil a capture in progress on
    // another thread: it waits for them (cuda_capture_gate.h).
    capture_gate().release([device = impl_->device, handle] {
        cudaSetDevice(device);
        cudaFree(handle);
    });
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
    // cudaFreeHost synchronizes the device too (raw_free).
    if (p) capture_gate().release([p] { cudaFreeHost(p); });
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

// ---- profiling ----

// ---- recordings: CUDA graphs by stream capture ----
// What the ops put on a stream is capturable: the kernels of
// cuda_kernels.cu, cudaMemcpyAsync between device buffers, cublasSgemm (cuBLAS supports capture;
// since CUDA 12.2 its default workspace comes from cudaMallocAsync, which becomes a node of the
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
    // Counted before it begins: from here frees wait (cuda_capture_gate.h).
    capture_gate().begin_capture();
    const cudaError_t begun = cudaStreamBeginCapture(cq.stream.get(), cudaStreamCaptureModeRelaxed);
    if (begun != cudaSuccess) capture_gate().end_capture();
    impl_->check(begun, "cudaStreamBeginCapture", "record");
    return true;
}

std::shared_ptr<RecordedWork> CudaBackend::end_recording_impl(Queue& q) {
    CudaQueue& cq = impl_->queue(q);
    // The capture ends, and the gate hears of it, before anything that can
    // throw: a capture left open would hold every free of the process back.
    cudaSetDevice(impl_->device);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(cq.stream.get(), &graph);
    capture_gate().end_capture();  // ended or failed: the frees that waited run
    Graph owned(graph);
    impl_->check(ended, "cudaStreamEndCapture", "record");
    // (The frees that ran may have made another device current.)
    impl_->use_device("record");
    auto work = std::make_shared<CudaGraph>();
    work->graph = std::move(owned);
    cudaGraphExec_t exec = nullptr;
    impl_->check(cudaGraphInstantiate(&exec, work->graph.get(), 0), "cudaGraphInstantiate",
                 "record");
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
    capture_gate().end_capture();
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
