// The Vulkan backend: every gpu::Backend operation as a compute shader
// (gpu/vulkan/shaders/, most of them the shared bodies of gpu/kernels/), on
// any Vulkan 1.2 device with buffer device addresses and 64-bit shader
// integers: NVIDIA's, AMD's and Intel's drivers, Mesa's RADV and ANV, Apple
// GPUs through MoltenVK, and lavapipe (Mesa's Vulkan on the CPU), which is
// how the tests run it for real on machines without a GPU.
//
// The work is split by job, like the OpenCL backend's:
//   vulkan_api       the loader, found at run time (dlopen), and the entry points
//   vulkan_device    instance, physical devices, the logical device and its queue
//   vulkan_memory    buffers (a DeviceBuffer's handle is a vk::Allocation*), staging
//   vulkan_pipelines the embedded SPIR-V and one pipeline per shader
//   vulkan_queue     a Queue: a command buffer recorded op by op, submitted on synchronize()
//   vulkan_recording a Recording: a secondary command buffer kept and replayed
//   vulkan_backend   this class: memory, queues, timings, health (vulkan_backend.cpp);
//                    the operations (vulkan_ops.cpp); the FFT (vulkan_fft.cpp)
//
// Errors: every Vulkan call is checked. A failure marks the backend failed
// and throws DeviceError("Vulkan <function>: <result> on <device>"); memory
// the device has no room for throws OutOfMemory without marking it failed,
// as on the other backends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

namespace vk {
struct PhysicalDevice;
class CommandStream;
struct BufferAccess;
enum class Kernel;
}  // namespace vk

class VulkanBackend final : public Backend {
  public:
    // Opaque: the Vulkan objects, so that users of this header need no
    // Vulkan headers.
    struct State;

    // Creates the logical device and builds every pipeline (slow: never on
    // an audio thread). Throws DeviceError naming the step that failed.
    VulkanBackend(const vk::PhysicalDevice& physical, DeviceInfo info);
    ~VulkanBackend() override;
    VulkanBackend(const VulkanBackend&) = delete;
    VulkanBackend& operator=(const VulkanBackend&) = delete;

    const DeviceInfo& info() const override;
    void* raw_allocate(std::size_t bytes) override;
    void raw_free(void* handle) noexcept override;
    // Plain host memory: every copy is staged through the queue's own
    // host-visible arena (vulkan_queue.h), which is what pinned memory buys
    // on the other backends.
    float* allocate_pinned(std::size_t floats) override;
    void free_pinned(float* p) noexcept override;

    std::unique_ptr<Queue> create_queue() override;
    void synchronize(Queue& q) override;

    std::vector<KernelTiming> kernel_timings() const override;
    void reset_timings() override;

  private:
    // Recordings: a kept secondary command buffer (vulkan_recording.h).
    bool begin_recording_impl(Queue& q) override;
    std::shared_ptr<RecordedWork> end_recording_impl(Queue& q) override;
    void abort_recording_impl(Queue& q) noexcept override;
    void replay_impl(Queue& q, const std::shared_ptr<RecordedWork>& work) override;

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

    // The queue's command stream; std::invalid_argument for a queue of
    // another backend or device.
    vk::CommandStream& stream_of(Queue& q, const char* op) const;
    // stream_of(), after applying an injected fault (which throws, or sleeps
    // for a late one).
    vk::CommandStream& begin(Queue& q, const char* op);
    // Records a dispatch of the element-wise shader `kernel` over `n` items,
    // which reads and writes the buffers `access` names.
    template <class Args>
    void launch(vk::CommandStream& s, vk::Kernel kernel, const Args& args, std::uint64_t n,
                const char* op, const vk::BufferAccess& access);
    void run_fft(Queue& q, const char* op, int n, int batch, bool forward, const DeviceBuffer& in,
                 DeviceBuffer& out);
    // The n roots of unity, device-resident, made on first use for each n.
    std::uint64_t twiddles(int n);
    // Runs `record` and turns a Vulkan failure into a failed backend.
    template <class F>
    void guarded(F&& record);

    std::unique_ptr<State> s_;
};

}  // namespace etude::gpu
