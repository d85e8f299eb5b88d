// One Vulkan logical device with one compute queue: what every other part of
// the backend (memory, pipelines, queues) is made from. Owned by the
// VulkanBackend; destroyed after everything made from it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "gpu/backend.h"
#include "gpu/vulkan/vulkan_api.h"

namespace etude::gpu::vk {

// What the registry learns of a physical device before opening it.
struct PhysicalDevice {
    VkPhysicalDevice handle = VK_NULL_HANDLE;
    DeviceInfo info;
    std::uint32_t queue_family = 0;
    VkPhysicalDeviceLimits limits{};
    bool timestamps = false;          // the compute queue family has timestamps
    bool portability_subset = false;  // MoltenVK: the extension must be enabled
    std::string unusable;             // why it cannot run the backend; empty if it can
};

// Every physical device the loader lists, usable or not; empty with `why`
// set when Vulkan cannot be used at all.
std::vector<PhysicalDevice> physical_devices(std::string* why);

class Device {
  public:
    // Throws DeviceError (naming the device and the failing call).
    explicit Device(const PhysicalDevice& physical);
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const DeviceApi& fn() const { return fn_; }
    VkDevice handle() const { return device_; }
    VkQueue queue() const { return queue_; }
    std::uint32_t queue_family() const { return family_; }
    // vkQueueSubmit needs the queue externally synchronised: every submitter holds this.
    std::mutex& queue_mutex() { return queue_mutex_; }

    // The first memory type among `allowed` (a VkMemoryRequirements'
    // memoryTypeBits) that has all of `wanted`; UINT32_MAX when none has.
    std::uint32_t memory_type(std::uint32_t allowed, VkMemoryPropertyFlags wanted) const;
    const VkPhysicalDeviceLimits& limits() const { return limits_; }
    // Nanoseconds per timestamp tick; 0 when the compute queue has no timestamps.
    double timestamp_period_ns() const { return timestamp_ns_; }
    const std::string& name() const { return name_; }

  private:
    DeviceApi fn_{};
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    std::uint32_t family_ = 0;
    std::mutex queue_mutex_;
    VkPhysicalDeviceMemoryProperties memory_{};
    VkPhysicalDeviceLimits limits_{};
    double timestamp_ns_ = 0;
    std::string name_;
};

}  // namespace etude::gpu::vk
