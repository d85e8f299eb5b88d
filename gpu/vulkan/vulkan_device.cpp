#include "gpu/vulkan/vulkan_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "gpu/host_compute.h"

namespace etude::gpu::vk {
namespace {

const char* vendor_name(std::uint32_t id) {
    switch (id) {
        case 0x10DE:
            return "NVIDIA";
        case 0x1002:
            return "AMD";
        case 0x8086:
            return "Intel";
        case 0x13B5:
            return "ARM";
        case 0x5143:
            return "Qualcomm";
        case 0x106B:
            return "Apple";
        case 0x10005:
            return "Mesa";
        default:
            return "unknown vendor";
    }
}

const char* type_name(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return "discrete";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return "integrated";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return "virtual";
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return "cpu";
        default:
            return "other";
    }
}

std::string version_string(std::uint32_t v) {
    return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
           "." + std::to_string(VK_API_VERSION_PATCH(v));
}

bool has_extension(const InstanceApi& api, VkPhysicalDevice d, const char* name) {
    std::uint32_t n = 0;
    if (api.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, nullptr) != VK_SUCCESS)
        return false;
    std::vector<VkExtensionProperties> list(n);
    api.vkEnumerateDeviceExtensionProperties(d, nullptr, &n, list.data());
    for (const auto& e : list)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

// DeviceInfo::compute_units. Core Vulkan does not count them; a vendor's
// extension does, where the driver offers it: NVIDIA's streaming
// multiprocessors (VK_NV_shader_sm_builtins), AMD's compute units
// (VK_AMD_shader_core_properties). A CPU device (lavapipe) runs on the
// host's threads, so it has the CPUs this process may use. Any other GPU
// says nothing of its cores: 1, "at least one", rather than a guess.
int count_compute_units(const InstanceApi& api, VkPhysicalDevice handle,
                        const VkPhysicalDeviceProperties& p) {
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) return host::usable_cpus();
    if (p.apiVersion < VK_API_VERSION_1_1) return 1;  // no vkGetPhysicalDeviceProperties2
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCorePropertiesAMD amd{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    if (has_extension(api, handle, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        props.pNext = &nv;
        api.vkGetPhysicalDeviceProperties2(handle, &props);
        if (nv.shaderSMCount > 0) return static_cast<int>(nv.shaderSMCount);
    }
    if (has_extension(api, handle, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
        props.pNext = &amd;
        api.vkGetPhysicalDeviceProperties2(handle, &props);
        const std::uint64_t units = std::uint64_t(amd.shaderEngineCount) *
                                    amd.shaderArraysPerEngineCount * amd.computeUnitsPerShaderArray;
        if (units > 0) return static_cast<int>(std::min<std::uint64_t>(units, 1u << 20));
    }
    return 1;
}

PhysicalDevice describe(const InstanceApi& api, VkPhysicalDevice handle) {
    PhysicalDevice pd;
    pd.handle = handle;
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    const bool v12 = [&] {
        VkPhysicalDeviceProperties p;
        api.vkGetPhysicalDeviceProperties(handle, &p);
        return p.apiVersion >= VK_API_VERSION_1_2;
    }();
    if (v12) props.pNext = &driver;
    api.vkGetPhysicalDeviceProperties2(handle, &props);
    const VkPhysicalDeviceProperties& p = props.properties;
    pd.limits = p.limits;

    DeviceInfo& info = pd.info;
    info.kind = BackendKind::Vulkan;
    info.name = p.deviceName;
    info.vendor = vendor_name(p.vendorID);
    info.platform = "Vulkan " + version_string(p.apiVersion);
    info.driver = v12 ? std::string(driver.driverName) + " " + driver.driverInfo
                      : version_string(p.driverVersion);
    info.is_gpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
                  p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                  p.deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
    info.compute_units = count_compute_units(api, handle, p);
    VkPhysicalDeviceMemoryProperties mem;
    api.vkGetPhysicalDeviceMemoryProperties(handle, &mem);
    for (std::uint32_t h = 0; h < mem.memoryHeapCount; ++h)
        if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info.global_memory += mem.memoryHeaps[h].size;
    info.capabilities = {"fft", "gemm", type_name(p.deviceType)};

    // What the shaders need: device addresses for buffers and 64-bit integers.
    if (!v12) {
        pd.unusable = "supports Vulkan " + version_string(p.apiVersion) + "; 1.2 is needed";
        return pd;
    }
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f12;
    api.vkGetPhysicalDeviceFeatures2(handle, &features);
    if (!f12.bufferDeviceAddress) {
        pd.unusable = "lacks bufferDeviceAddress, which the shaders use for every buffer";
        return pd;
    }
    if (!features.features.shaderInt64) {
        pd.unusable = "lacks shaderInt64, which the shaders use for indices";
        return pd;
    }
    // The element-wise shaders run 256 invocations per work-group
    // (shaders/element_launch.glsl); Vulkan guarantees only 128.
    if (p.limits.maxComputeWorkGroupInvocations < 256 ||
        p.limits.maxComputeWorkGroupSize[0] < 256) {
        pd.unusable = "runs fewer than 256 invocations per work-group, which the shaders use";
        return pd;
    }
    std::uint32_t families = 0;
    api.vkGetPhysicalDeviceQueueFamilyProperties(handle, &families, nullptr);
    std::vector<VkQueueFamilyProperties> fam(families);
    api.vkGetPhysicalDeviceQueueFamilyProperties(handle, &families, fam.data());
    // A compute family; one without graphics first (a dedicated compute
    // queue does not wait behind a desktop's rendering).
    int chosen = -1;
    for (std::uint32_t i = 0; i < families; ++i)
        if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            if (chosen < 0 || !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) chosen = int(i);
        }
    if (chosen < 0) {
        pd.unusable = "has no compute queue";
        return pd;
    }
    pd.queue_family = static_cast<std::uint32_t>(chosen);
    // Device times per command need timestamps on the queue the backend uses.
    pd.timestamps = fam[std::size_t(chosen)].timestampValidBits > 0;
    if (pd.timestamps) info.capabilities.push_back("profiling");
    pd.portability_subset = has_extension(api, handle, "VK_KHR_portability_subset");
    return pd;
}

}  // namespace

std::vector<PhysicalDevice> physical_devices(std::string* why) {
    const InstanceApi* api = instance_api(why);
    if (!api) return {};
    std::uint32_t n = 0;
    VkResult r = api->vkEnumeratePhysicalDevices(api->instance, &n, nullptr);
    if (r != VK_SUCCESS) {
        *why = std::string("vkEnumeratePhysicalDevices failed: ") + result_name(r);
        return {};
    }
    std::vector<VkPhysicalDevice> handles(n);
    api->vkEnumeratePhysicalDevices(api->instance, &n, handles.data());
    handles.resize(n);
    if (handles.empty()) *why = "no Vulkan driver with a device on this machine";
    std::vector<PhysicalDevice> out;
    for (VkPhysicalDevice h : handles) out.push_back(describe(*api, h));
    return out;
}

Device::Device(const PhysicalDevice& physical) : family_(physical.queue_family) {
    std::string why;
    const InstanceApi* api = instance_api(&why);
    if (!api) throw DeviceError("Vulkan: " + why);
    name_ = physical.info.name;
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = family_;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12.bufferDeviceAddress = VK_TRUE;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f12;
    features.features.shaderInt64 = VK_TRUE;
    VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    info.pNext = &features;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    const char* portability = "VK_KHR_portability_subset";
    if (physical.portability_subset) {
        info.enabledExtensionCount = 1;
        info.ppEnabledExtensionNames = &portability;
    }
    const VkResult r = api->vkCreateDevice(physical.handle, &info, nullptr, &device_);
    if (r != VK_SUCCESS)
        throw DeviceError("Vulkan vkCreateDevice: " + std::string(result_name(r)) + " on " + name_);
    if (!load_device_api(*api, device_, &fn_)) {
        // Only vkDestroyDevice is needed to undo the device; ask for it alone.
        auto destroy = reinterpret_cast<PFN_vkDestroyDevice>(
            api->vkGetDeviceProcAddr(device_, "vkDestroyDevice"));
        if (destroy) destroy(device_, nullptr);
        throw DeviceError("Vulkan: the driver of " + name_ + " lacks a core 1.2 function");
    }
    fn_.vkGetDeviceQueue(device_, family_, 0, &queue_);

    limits_ = physical.limits;
    if (physical.timestamps) timestamp_ns_ = limits_.timestampPeriod;

    api->vkGetPhysicalDeviceMemoryProperties(physical.handle, &memory_);
}

std::uint32_t Device::memory_type(std::uint32_t allowed, VkMemoryPropertyFlags wanted) const {
    for (std::uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
        if ((allowed & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & wanted) == wanted)
            return i;
    return UINT32_MAX;
}

Device::~Device() {
    if (device_) {
        fn_.vkDeviceWaitIdle(device_);
        fn_.vkDestroyDevice(device_, nullptr);
    }
}

}  // namespace etude::gpu::vk
