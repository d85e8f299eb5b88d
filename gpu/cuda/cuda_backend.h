// The CUDA backend: cuBLAS for GEMM and the ungrouped convolutions, cuFFT for
// transforms, direct kernels for the rest. It lives in the module libetude_cuda.so (see
// cuda_module.h) and is only ever reached through the Backend interface.
//
// This header deliberately includes no CUDA header, so that it compiles
// where the toolkit's headers are not on the include path; everything
// CUDA-typed sits behind CudaBackend::Impl.
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

namespace cuda {
struct ConvGemmStatus;
}

class CudaBackend final : public Backend {
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
    bool set_math_precision(MathPrecision p) override;
    MathPrecision math_precision() const override;
    void* raw_allocate(std::size_t bytes) override;
    void raw_free(void* handle) noexcept override;
    float* allocate_pinned(std::size_t floats) override;
    void free_pinned(float* p) noexcept override;

    std::unique_ptr<Queue> create_queue() override;
    void synchronize(Queue& q) override;

    std::vector<KernelTiming> kernel_timings() const override;
    void reset_timings() override;

  private:
    // Recordings: CUDA graphs captured from the queue's stream.
    bool begin_recording_impl(Queue& q) override;
    std::shared_ptr<RecordedWork> end_recording_impl(Queue& q) override;
    void abort_recording_impl(Queue& q) noexcept override;
    void replay_impl(Queue& q, const std::shared_ptr<RecordedWork>& work) override;

    // The operations, with arguments already checked by gpu::Backend.
    void copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset, const float* src,
                             std::size_t floats) override;
    void copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src, std::size_t src_offset,
                           std::size_t floats) override;
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
    struct Impl;
    class Op;
    friend class Op;

    // Marks the backend failed and throws DeviceError(what).
    [[noreturn]] void fail(const std::string& what);
    // Ends a convolution run as GEMMs (cuda_conv_gemm.h): OutOfMemory or
    // the failed call's error, else the op's timing filed.
    void conv_done(Op& op, const cuda::ConvGemmStatus& st);

    std::unique_ptr<Impl> impl_;
};

}  // namespace etude::gpu
