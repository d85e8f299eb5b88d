// Built instead of the rest of gpu/vulkan/ when the project is configured
// without Vulkan (-DETUDE_WITH_VULKAN=OFF, or no Vulkan headers or glslc at
// build time): the registry then reports Vulkan as absent, saying why.
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {

std::vector<DeviceInfo> list_vulkan_devices(std::vector<std::string>& notes) {
    notes.push_back("Vulkan: this build has no Vulkan backend (" ETUDE_VULKAN_ABSENT ")");
    return {};
}

std::unique_ptr<Backend> open_vulkan_device(int) {
    throw DeviceError("this build has no Vulkan backend (" ETUDE_VULKAN_ABSENT ")");
}

}  // namespace etude::gpu
