// Entry points of the Vulkan backend for the registry, and the Vulkan device
// itself (instance and logical device, memory types, the compute queue).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

// Every usable Vulkan device, in the loader's order (DeviceInfo::index
// numbers them 0..n-1). A device without what the shaders need (Vulkan 1.2,
// buffer device addresses, 64-bit integers in shaders, a compute queue) is
// left out with a note saying which; so is every device when there is no
// loader, no driver, or the build has no Vulkan backend.
std::vector<DeviceInfo> list_vulkan_devices(std::vector<std::string>& notes);

// Opens Vulkan device `index` (as numbered above): the logical device, its
// compute queue and every pipeline (compiled once, here, not on the audio
// path). Throws gpu::DeviceError with the reason.
std::unique_ptr<Backend> open_vulkan_device(int index);

}  // namespace etude::gpu
