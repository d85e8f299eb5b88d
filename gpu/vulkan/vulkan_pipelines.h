// The backend's compute pipelines: one per shader of gpu/vulkan/shaders/,
// compiled to SPIR-V at build time (glslc, checked by spirv-val) and
// embedded in the library (cmake/embed_spirv.cmake). All share one layout:
// no descriptor sets, only push constants (buffers travel as device
// addresses). Made once, when the device is opened, so that no stream pays
// for pipeline compilation (seconds on lavapipe for the whole set).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/vulkan/vulkan_device.h"

namespace etude::gpu::vk {

// The embedded SPIR-V modules, by shader file name (generated).
struct SpirvModule {
    const char* name;
    const std::uint32_t* words;
    std::size_t count;
};
extern const SpirvModule kSpirvModules[];
extern const std::size_t kSpirvModuleCount;

enum class Kernel {
    Activation,
    Axpby,
    AddBias,
    PolarSpectrum,
    FrameSignal,
    OverlapAdd,
    ComplexMultiply,
    ComplexExp,
    GatedTanh,
    MinimumPhaseFold,
    Conv1d,
    Conv1dTiled,
    FftPass,
    Transpose,
    CopyRows,
    CopySlotRows,
    Gemm,
    GemmDirect,
    LayerNorm,
    SoftmaxRows,
    RelativeAttentionScores,
    RelativeAttentionValues,
    BroadcastMultiply,
    SplineInverse,
    Count
};
// The shader's file name without .comp ("activation", ...).
const char* shader_name(Kernel k);

class Pipelines {
  public:
    // Every push-constant block fits in this many bytes, the least any
    // Vulkan device offers.
    static constexpr std::uint32_t kPushBytes = 128;

    // Throws DeviceError naming the shader that failed to build.
    explicit Pipelines(Device& device);
    ~Pipelines();
    Pipelines(const Pipelines&) = delete;
    Pipelines& operator=(const Pipelines&) = delete;

    VkPipeline operator[](Kernel k) const { return pipelines_[static_cast<int>(k)]; }
    VkPipelineLayout layout() const { return layout_; }

  private:
    void destroy() noexcept;
    Device& device_;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipelines_[static_cast<int>(Kernel::Count)] = {};
};

}  // namespace etude::gpu::vk
