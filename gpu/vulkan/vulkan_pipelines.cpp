#include "gpu/vulkan/vulkan_pipelines.h"

#include <cstring>
#include <string>

namespace etude::gpu::vk {

const char* shader_name(Kernel k) {
    switch (k) {
        case Kernel::Activation:
            return "activation";
        case Kernel::Axpby:
            return "axpby";
        case Kernel::AddBias:
            return "add_bias";
        case Kernel::PolarSpectrum:
            return "polar_spectrum";
        case Kernel::FrameSignal:
            return "frame_signal";
        case Kernel::OverlapAdd:
            return "overlap_add";
        case Kernel::ComplexMultiply:
            return "complex_multiply";
        case Kernel::ComplexExp:
            return "complex_exp";
        case Kernel::GatedTanh:
            return "gated_tanh";
        case Kernel::MinimumPhaseFold:
            return "minimum_phase_fold";
        case Kernel::Conv1d:
            return "conv1d";
        case Kernel::Conv1dTiled:
            return "conv1d_tiled";
        case Kernel::FftPass:
            return "fft_pass";
        case Kernel::Transpose:
            return "transpose";
        case Kernel::CopyRows:
            return "copy_rows";
        case Kernel::CopySlotRows:
            return "copy_slot_rows";
        case Kernel::Gemm:
            return "gemm";
        case Kernel::GemmDirect:
            return "gemm_direct";
        case Kernel::LayerNorm:
            return "layer_norm";
        case Kernel::SoftmaxRows:
            return "softmax_rows";
        case Kernel::RelativeAttentionScores:
            return "relative_attention_scores";
        case Kernel::RelativeAttentionValues:
            return "relative_attention_values";
        case Kernel::BroadcastMultiply:
            return "broadcast_multiply";
        case Kernel::SplineInverse:
            return "spline_inverse";
        case Kernel::Count:
            break;
    }
    return "?";
}

Pipelines::Pipelines(Device& device) : device_(device) {
    const DeviceApi& fn = device.fn();
    VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.pushConstantRangeCount = 1;
    layout.pPushConstantRanges = &push;
    VkResult r = fn.vkCreatePipelineLayout(device.handle(), &layout, nullptr, &layout_);
    if (r != VK_SUCCESS)
        throw DeviceError(std::string("Vulkan vkCreatePipelineLayout: ") + result_name(r));
    for (int k = 0; k < static_cast<int>(Kernel::Count); ++k) {
        const char* name = shader_name(static_cast<Kernel>(k));
        const SpirvModule* spirv = nullptr;
        for (std::size_t i = 0; i < kSpirvModuleCount; ++i)
            if (std::strcmp(kSpirvModules[i].name, name) == 0) spirv = &kSpirvModules[i];
        if (!spirv) {
            destroy();
            throw DeviceError(std::string("Vulkan: the shader '") + name +
                              "' is not embedded in this build");
        }
        VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        module_info.codeSize = spirv->count * sizeof(std::uint32_t);
        module_info.pCode = spirv->words;
        VkShaderModule module = VK_NULL_HANDLE;
        r = fn.vkCreateShaderModule(device.handle(), &module_info, nullptr, &module);
        if (r == VK_SUCCESS) {
            VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
            info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
            info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
            info.stage.module = module;
            info.stage.pName = "main";
            info.layout = layout_;
            r = fn.vkCreateComputePipelines(device.handle(), VK_NULL_HANDLE, 1, &info, nullptr,
                                            &pipelines_[k]);
            fn.vkDestroyShaderModule(device.handle(), module, nullptr);
        }
        if (r != VK_SUCCESS) {
            destroy();
            throw DeviceError(std::string("Vulkan: the shader '") + name + "' failed to build on " +
                              device.name() + ": " + result_name(r));
        }
    }
}

Pipelines::~Pipelines() {
    destroy();
}

void Pipelines::destroy() noexcept {
    for (VkPipeline& p : pipelines_) {
        if (p) device_.fn().vkDestroyPipeline(device_.handle(), p, nullptr);
        p = VK_NULL_HANDLE;
    }
    if (layout_) device_.fn().vkDestroyPipelineLayout(device_.handle(), layout_, nullptr);
    layout_ = VK_NULL_HANDLE;
}

}  // namespace etude::gpu::vk
