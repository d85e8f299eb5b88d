// The OpenCL backend: every gpu::Backend operation as an OpenCL kernel (one
// program, compiled once when the device is opened) or a clFFT transform.
// Runs on any OpenCL 1.2 device: discrete GPUs, or PoCL on the CPU.
//
// Memory: a DeviceBuffer's handle is its cl_mem. Pinned buffers are
// CL_MEM_ALLOC_HOST_PTR buffers mapped once for their whole life (the
// runtime can then copy from them without staging); the backend keeps the
// buffer behind each mapped pointer.
//
// Queues: each Queue owns one in-order, profiling-enabled cl_command_queue
// and its own cl_kernel objects, because clSetKernelArg on a kernel shared
// between threads would race. Every operation records a profiling event;
// events are read back lazily (in synchronize(), or when many have piled
// up), so operations stay asynchronous.
//
// FFTs: clFFT plans are cached per (n, batch, direction) and baked on first
// use. Baking compiles kernels and can take seconds (PoCL), so call
// prewarm_fft() for the sizes you will use before audio starts.
//
// Errors: every OpenCL call is checked. A failure marks the backend failed
// and throws DeviceError("OpenCL <function>: <error> while <op>"); an
// allocation the device has no room for throws OutOfMemory without marking
// it failed (callers recover by trimming pools or falling back to the CPU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

// All kernels of the backend as one OpenCL C program: gpu/opencl/kernels/*.cl
// with gpu/kernels/kernel_bodies.h inlined, embedded at build time
// (cmake/embed_opencl.cmake; the definition is generated).
const char* opencl_kernel_source();

// "CL_OUT_OF_RESOURCES" for -5, etc.; clFFT's extra status codes included.
const char* opencl_error_name(int err);

class OpenClBackend final : public Backend {
  public:
    // Opaque: the OpenCL and clFFT objects, so that users of this header need
    // neither the OpenCL nor the clFFT headers.
    struct State;

    // Takes the device's cl_platform_id and cl_device_id (as void*: see
    // State). Creates the context and an internal queue, compiles the
    // kernels, runs each once (see warm_up_kernels) and sets up clFFT; slow,
    // never call it from an audio thread.
    // Throws DeviceError, with the build log's first lines if a kernel does
    // not compile.
    OpenClBackend(void* platform, void* device, DeviceInfo info);
    ~OpenClBackend() override;
    OpenClBackend(const OpenClBackend&) = delete;
    OpenClBackend& operator=(const OpenClBackend&) = delete;

    const DeviceInfo& info() const override;
    void* raw_allocate(std::size_t bytes) override;
    void raw_free(void* handle) noexcept override;
    float* allocate_pinned(std::size_t floats) override;
    void free_pinned(float* p) noexcept override;

    std::unique_ptr<Queue> create_queue() override;
    void synchronize(Queue& q) override;

    std::vector<KernelTiming> kernel_timings() const override;
    void reset_timings() override;

    // Creates and bakes the forward and inverse clFFT plans for (n, batch) now,
    // so that the first rfft/irfft of that shape does not stall for the
    // kernel compilation. Blocking; call it off the audio path.
    void prewarm_fft(int n, int batch);

  private:
    // The operations, with arguments already checked by gpu::Backend.
    void copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset_floats,
                             const float* src, std::size_t floats) override;
    void copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src,
                           std::size_t src_offset_floats, std::size_t floats) override;
    void fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) override;
    void activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                         std::size_t n, float alpha) override;
    void gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                   const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb, float beta,
                   DeviceBuffer& c, int ldc) override;
    void conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x, const DeviceBuffer& w,
                     const DeviceBuffer& bias, DeviceBuffer& y) override;
    void conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                               const DeviceBuffer& w, const DeviceBuffer& bias,
                               DeviceBuffer& y) override;
    void layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                         const DeviceBuffer& gamma, const DeviceBuffer& beta,
                         DeviceBuffer& y) override;
    void axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
                    DeviceBuffer& y) override;
    void copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                        std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                        std::size_t dst_offset, std::size_t dst_stride) override;
    void transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                        DeviceBuffer& y) override;
    void add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                       DeviceBuffer& y) override;
    void polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                             const DeviceBuffer& x, DeviceBuffer& y) override;
    void rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) override;
    void irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out) override;
    void frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop, int n_frames,
                           const DeviceBuffer& window, DeviceBuffer& frames) override;
    void overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop, int n_frames,
                          const DeviceBuffer& window, DeviceBuffer& out) override;
    void complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                               DeviceBuffer& c, std::size_t n) override;
    void complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n) override;
    void minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                 DeviceBuffer& y) override;
    void gated_tanh_impl(Queue& q, int batch, int channels, int length, const DeviceBuffer& x,
                         DeviceBuffer& y) override;
    void softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                           DeviceBuffer& y) override;
    void relative_attention_scores_impl(Queue& q, int batch, int heads, int length, int channels,
                                        int window, float scale, const DeviceBuffer& queries,
                                        const DeviceBuffer& keys, const DeviceBuffer& rel_k,
                                        const DeviceBuffer& key_mask,
                                        DeviceBuffer& scores) override;
    void relative_attention_values_impl(Queue& q, int batch, int heads, int length, int channels,
                                        int window, const DeviceBuffer& p,
                                        const DeviceBuffer& values, const DeviceBuffer& rel_v,
                                        DeviceBuffer& y) override;
    void copy_slot_rows_impl(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                             bool from_slots, const DeviceBuffer& src, DeviceBuffer& dst) override;
    void broadcast_multiply_impl(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                 bool per_row, DeviceBuffer& y) override;
    void spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                             const DeviceBuffer& params, const DeviceBuffer& x,
                             DeviceBuffer& y) override;

  private:
    class ClQueue;
    struct FftPlan;
    struct Range;  // global and local sizes of one kernel launch

    static Range range1d(std::size_t n);
    template <class... Args>
    void launch(ClQueue& q, const char* op, int kernel, const Range& r, const Args&... args);

    // Applies an injected fault (throws, or sleeps for a Late one).
    void begin(const char* op);
    // Throws DeviceError (marking the backend failed) unless err is success.
    void check(int err, const char* function, const char* op) {
        if (err != 0) fail(err, function, op);
    }
    [[noreturn]] void fail(int err, const char* function, const char* op);
    ClQueue& queue_of(Queue& q, const char* op);
    FftPlan& fft_plan(int n, int batch, bool forward, void* bake_queue);
    void run_fft(Queue& q, const char* op, int n, int batch, bool forward, void* in, void* out);
    // The op just added to q.pending: kept for its timing when profiling
    // (then the finished ones are read if many have piled up), else its
    // events are let go.
    void track(ClQueue& q);
    void collect_timings(ClQueue& q, bool all);
    void warm_up_kernels();

    std::unique_ptr<State> s_;
};

}  // namespace etude::gpu
