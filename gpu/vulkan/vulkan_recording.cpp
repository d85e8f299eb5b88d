#include "gpu/vulkan/vulkan_recording.h"

#include <string>

namespace etude::gpu::vk {

RecordedCommands::RecordedCommands(Device& device) : device_(device) {
    const DeviceApi& fn = device.fn();
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.queueFamilyIndex = device.queue_family();
    VkResult r = fn.vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo cb{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        cb.commandPool = pool_;
        cb.level = VK_COMMAND_BUFFER_LEVEL_SECONDARY;
        cb.commandBufferCount = 1;
        r = fn.vkAllocateCommandBuffers(device.handle(), &cb, &cb_);
    }
    if (r == VK_SUCCESS) {
        // Outside any render pass: nothing to inherit, but a secondary
        // command buffer must say so. Kept (no ONE_TIME_SUBMIT), and
        // SIMULTANEOUS_USE so that one queue batch may replay it twice.
        VkCommandBufferInheritanceInfo inherit{VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO};
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT;
        begin.pInheritanceInfo = &inherit;
        r = fn.vkBeginCommandBuffer(cb_, &begin);
    }
    if (r != VK_SUCCESS) {
        release();
        const std::string what =
            std::string("Vulkan: creating a recording on ") + device.name() + ": " + result_name(r);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            throw OutOfMemory(what);
        throw DeviceError(what);
    }
    plan_.start();
}

RecordedCommands::~RecordedCommands() {
    release();
}

void RecordedCommands::release() noexcept {
    for (Allocation* a : kept_) free_buffer(device_, a);
    kept_.clear();
    scratch_[0] = scratch_[1] = nullptr;
    // Frees the command buffer with it.
    if (pool_) device_.fn().vkDestroyCommandPool(device_.handle(), pool_, nullptr);
    pool_ = VK_NULL_HANDLE;
    cb_ = VK_NULL_HANDLE;
}

VkDeviceAddress RecordedCommands::scratch(int slot, std::size_t bytes) {
    Allocation*& a = scratch_[slot];
    if (!a || a->bytes < bytes) {
        a = allocate_buffer(device_, bytes, false);
        kept_.push_back(a);
    }
    return a->address;
}

void RecordedCommands::end() {
    const VkResult r = device_.fn().vkEndCommandBuffer(cb_);
    if (r != VK_SUCCESS)
        throw DeviceError(std::string("Vulkan vkEndCommandBuffer: ") + result_name(r) + " on " +
                          device_.name());
}

}  // namespace etude::gpu::vk
