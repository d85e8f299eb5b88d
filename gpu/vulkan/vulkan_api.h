// The Vulkan entry points the backend uses, loaded at run time from the
// system's Vulkan loader (libvulkan.so.1) with dlopen, so that a machine
// without the loader, or without any Vulkan driver, still runs everything
// else (the registry then says why in `etude devices`). The library never
// links libvulkan.
//
// One process-wide instance (Vulkan 1.2 or newer) is created on first use
// and kept until exit, like the registry that owns the devices made from it.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan_core.h>

#include <string>

namespace etude::gpu::vk {

// Every function the backend calls, as one table. X(name) lists them; the
// loader fills them from vkGetInstanceProcAddr and vkGetDeviceProcAddr.
#define ETUDE_VK_INSTANCE_FUNCTIONS(X)          \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkCreateDevice)                           \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkGetDeviceProcAddr)

#define ETUDE_VK_DEVICE_FUNCTIONS(X) \
    X(vkDestroyDevice)               \
    X(vkGetDeviceQueue)              \
    X(vkCreateBuffer)                \
    X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) \
    X(vkAllocateMemory)              \
    X(vkFreeMemory)                  \
    X(vkBindBufferMemory)            \
    X(vkMapMemory)                   \
    X(vkGetBufferDeviceAddress)      \
    X(vkCreateShaderModule)          \
    X(vkDestroyShaderModule)         \
    X(vkCreatePipelineLayout)        \
    X(vkDestroyPipelineLayout)       \
    X(vkCreateComputePipelines)      \
    X(vkDestroyPipeline)             \
    X(vkCreateCommandPool)           \
    X(vkDestroyCommandPool)          \
    X(vkResetCommandPool)            \
    X(vkAllocateCommandBuffers)      \
    X(vkBeginCommandBuffer)          \
    X(vkEndCommandBuffer)            \
    X(vkCmdBindPipeline)             \
    X(vkCmdPushConstants)            \
    X(vkCmdDispatch)                 \
    X(vkCmdPipelineBarrier)          \
    X(vkCmdCopyBuffer)               \
    X(vkCmdFillBuffer)               \
    X(vkCmdExecuteCommands)          \
    X(vkCmdWriteTimestamp)           \
    X(vkCmdResetQueryPool)           \
    X(vkCreateQueryPool)             \
    X(vkDestroyQueryPool)            \
    X(vkGetQueryPoolResults)         \
    X(vkCreateFence)                 \
    X(vkDestroyFence)                \
    X(vkResetFences)                 \
    X(vkWaitForFences)               \
    X(vkQueueSubmit)                 \
    X(vkDeviceWaitIdle)

struct InstanceApi {
    VkInstance instance = VK_NULL_HANDLE;
    std::uint32_t version = 0;  // the loader's instance version (VK_API_VERSION_*)
#define ETUDE_VK_DECLARE(name) PFN_##name name = nullptr;
    ETUDE_VK_INSTANCE_FUNCTIONS(ETUDE_VK_DECLARE)
};

struct DeviceApi {
    ETUDE_VK_DEVICE_FUNCTIONS(ETUDE_VK_DECLARE)
#undef ETUDE_VK_DECLARE
};

// The process's instance, made on the first call. nullptr when Vulkan cannot
// be used at all; `why` then says so in one line ("no Vulkan loader
// (libvulkan.so.1) on this machine", "the Vulkan loader is 1.1; 1.2 is
// needed", "vkCreateInstance failed: VK_ERROR_INCOMPATIBLE_DRIVER").
const InstanceApi* instance_api(std::string* why);

// Loads the device-level functions of `device`; false if one is missing.
bool load_device_api(const InstanceApi& api, VkDevice device, DeviceApi* out);

// "VK_ERROR_DEVICE_LOST" for VK_ERROR_DEVICE_LOST, etc.
const char* result_name(VkResult r);

}  // namespace etude::gpu::vk
