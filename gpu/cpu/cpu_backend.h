// The CPU backend: the reference implementation of every operation, and the
// fallback when no device is there or a device fails. FFTW for transforms,
// OpenBLAS for GEMM and the convolutions (cpu_conv.h), plain loops for the
// rest. Work runs at once on the calling thread; queues exist only to
// satisfy the interface.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "gpu/backend.h"

namespace etude::gpu {

class CpuBackend final : public Backend {
  public:
    CpuBackend();
    ~CpuBackend() override;

    const DeviceInfo& info() const override { return info_; }
    void* raw_allocate(std::size_t bytes) override;
    void raw_free(void* handle) noexcept override;
    float* allocate_pinned(std::size_t floats) override;
    void free_pinned(float* p) noexcept override;

    std::unique_ptr<Queue> create_queue() override;
    void synchronize(Queue& q) override;

    std::vector<KernelTiming> kernel_timings() const override;
    void reset_timings() override;

  private:
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
    void copy_slot_rows_impl(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                             bool from_slots, const DeviceBuffer& src, DeviceBuffer& dst) override;
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
    void broadcast_multiply_impl(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                 bool per_row, DeviceBuffer& y) override;
    void spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                             const DeviceBuffer& params, const DeviceBuffer& x,
                             DeviceBuffer& y) override;

  private:
    struct FftPlans;
    FftPlans& plans(int n);
    class Timer;

    DeviceInfo info_;
    std::mutex plans_mu_;
    std::map<int, std::unique_ptr<FftPlans>> plans_;
    mutable std::mutex timing_mu_;
    std::map<std::string, KernelTiming> timings_;
};

}  // namespace etude::gpu
