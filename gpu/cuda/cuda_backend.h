// The CUDA backend: cuBLAS for GEMM, cuFFT for transforms, direct kernels for
// the rest. It lives in the module libetude_cuda.so (see cuda_module.h) and
// is only ever reached through the Backend interface and CudaGraphs below.
//
// This header deliberately includes no CUDA header: code that does not link
// the module (tests, benchmarks, the registry) includes it to reach
// CudaGraphs, and must compile where the toolkit's headers are not on the
// include path. Everything CUDA-typed sits behind CudaBackend::Impl.
//
// Device: each CudaBackend drives one device; every call makes that device
// current on the calling thread first, so one process can hold backends for
// several GPUs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

// CUDA Graphs: at audio block sizes a chain of small kernels costs more in
// launch overhead than in work; capturing the chain once and replaying it
// as one graph launch removes most of that. How much it saves is measured
// on a GPU by bench/cuda_bench.cpp (CudaGraph* benchmarks); it is not
// verified on the machines this was written on, which have no GPU.
//
// Reached from outside the module with dynamic_cast<CudaGraphs*>(backend):
// it is a pure interface, so the cast needs no symbol from the module.
//
// Rules for what is captured:
//   - begin_capture(q) ... end_capture(q) records the ops issued on q in
//     between instead of running them; replay(q, id) runs them again, with
//     the same buffers, sizes and host pointers as at capture time.
//   - Run every op once on q before capturing it: first use creates cuFFT
//     plans, the cuBLAS handle and scratch memory, which should not happen
//     while a stream captures.
//   - Host memory in captured copies must be pinned (allocate_pinned) and
//     stay valid while the graph can be replayed; the device buffers too.
//   - Graphs belong to the queue they were captured on and are destroyed
//     with it (they use its cuFFT work areas); replay only on that queue.
//   - No kernel timings are recorded during capture; each replay is timed
//     as one op, "graph_replay".
class CudaGraphs {
  public:
    virtual void begin_capture(Queue& q) = 0;
    // Ends the capture and instantiates it; returns the graph's id on q.
    // Throws DeviceError if the capture failed (an op in it threw, or an
    // operation that cannot be captured was issued).
    virtual int end_capture(Queue& q) = 0;
    // Asynchronous, like any op on q.
    virtual void replay(Queue& q, int graph) = 0;
    virtual void release_graph(Queue& q, int graph) = 0;

  protected:
    ~CudaGraphs() = default;
};

class CudaBackend final : public Backend, public CudaGraphs {
  public:
    // Opens device `index` among the supported (sm_80 or newer) CUDA
    // devices, numbered as etude_cuda_list_devices lists them; throws
    // DeviceError when it cannot.
    explicit CudaBackend(int index);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    // What cudaGetDeviceProperties says about CUDA device `ordinal`, in our
    // terms (used by etude_cuda_list_devices without opening the device).
    static DeviceInfo describe(int ordinal);

    const DeviceInfo& info() const override;
    void* raw_allocate(std::size_t bytes) override;
    void raw_free(void* handle) noexcept override;
    float* allocate_pinned(std::size_t floats) override;
    void free_pinned(float* p) noexcept override;

    std::unique_ptr<Queue> create_queue() override;
    void copy_to_device(Queue& q, DeviceBuffer& dst, std::size_t dst_offset, const float* src,
                        std::size_t floats) override;
    void copy_to_host(Queue& q, float* dst, const DeviceBuffer& src, std::size_t src_offset,
                      std::size_t floats) override;
    void fill(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) override;
    void synchronize(Queue& q) override;

    void activation(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n,
                    float alpha) override;
    void gemm(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb, float beta,
              DeviceBuffer& c, int ldc) override;
    void conv1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x, const DeviceBuffer& w,
                const DeviceBuffer& bias, DeviceBuffer& y) override;
    void conv_transpose1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                          const DeviceBuffer& w, const DeviceBuffer& bias,
                          DeviceBuffer& y) override;
    void layer_norm(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                    const DeviceBuffer& gamma, const DeviceBuffer& beta, DeviceBuffer& y) override;
    void axpby(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
               DeviceBuffer& y) override;
    void copy_rows(Queue& q, int rows, int cols, const DeviceBuffer& src, std::size_t src_offset,
                   std::size_t src_stride, DeviceBuffer& dst, std::size_t dst_offset,
                   std::size_t dst_stride) override;
    void transpose(Queue& q, int rows, int cols, const DeviceBuffer& x, DeviceBuffer& y) override;
    void add_bias(Queue& q, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                  DeviceBuffer& y) override;
    void polar_spectrum(Queue& q, int frames, int bins, float max_magnitude, const DeviceBuffer& x,
                        DeviceBuffer& y) override;
    void rfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) override;
    void irfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) override;
    void frame_signal(Queue& q, const DeviceBuffer& signal, int n_fft, int hop, int n_frames,
                      const DeviceBuffer& window, DeviceBuffer& frames) override;
    void overlap_add(Queue& q, const DeviceBuffer& frames, int n_fft, int hop, int n_frames,
                     const DeviceBuffer& window, DeviceBuffer& out) override;
    void complex_multiply(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& c,
                          std::size_t n) override;
    void complex_exp(Queue& q, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n) override;
    void minimum_phase_fold(Queue& q, int n, int batch, const DeviceBuffer& x,
                            DeviceBuffer& y) override;

    std::vector<KernelTiming> kernel_timings() const override;
    void reset_timings() override;

    void begin_capture(Queue& q) override;
    int end_capture(Queue& q) override;
    void replay(Queue& q, int graph) override;
    void release_graph(Queue& q, int graph) override;

  private:
    struct Impl;
    class Op;
    friend class Op;

    // Marks the backend failed and throws DeviceError(what).
    [[noreturn]] void fail(const std::string& what);

    std::unique_ptr<Impl> impl_;
};

}  // namespace etude::gpu
