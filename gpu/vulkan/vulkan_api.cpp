#include "gpu/vulkan/vulkan_api.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <vector>

namespace etude::gpu::vk {
namespace {

const InstanceApi* make_instance(std::string* why) {
    // The loader's soname; the unversioned name is only there with -dev packages.
    void* lib = ::dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        *why = "no Vulkan loader (libvulkan.so.1) on this machine";
        return nullptr;
    }
    auto get = reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(lib, "vkGetInstanceProcAddr"));
    if (!get) {
        *why = "libvulkan.so.1 has no vkGetInstanceProcAddr";
        return nullptr;
    }
    auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
        get(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
    auto create = reinterpret_cast<PFN_vkCreateInstance>(get(VK_NULL_HANDLE, "vkCreateInstance"));
    std::uint32_t version = VK_API_VERSION_1_0;
    if (enumerate_version) enumerate_version(&version);
    if (!create || version < VK_API_VERSION_1_2) {
        *why = "the Vulkan loader supports Vulkan " +
               std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
               std::to_string(VK_API_VERSION_MINOR(version)) + "; 1.2 is needed";
        return nullptr;
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "LibEtude";
    app.pEngineName = "LibEtude";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    info.pApplicationInfo = &app;
    // Drivers that implement Vulkan only in part (MoltenVK on macOS) are
    // listed only when the instance asks for them.
    const char* portability = "VK_KHR_portability_enumeration";
    auto enumerate_extensions = reinterpret_cast<PFN_vkEnumerateInstanceExtensionProperties>(
        get(VK_NULL_HANDLE, "vkEnumerateInstanceExtensionProperties"));
    std::uint32_t count = 0;
    if (enumerate_extensions && enumerate_extensions(nullptr, &count, nullptr) == VK_SUCCESS) {
        std::vector<VkExtensionProperties> extensions(count);
        enumerate_extensions(nullptr, &count, extensions.data());
        for (const auto& e : extensions)
            if (std::strcmp(e.extensionName, portability) == 0) {
                info.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
                info.enabledExtensionCount = 1;
                info.ppEnabledExtensionNames = &portability;
            }
    }
    auto* api = new InstanceApi;
    api->version = version;
    const VkResult r = create(&info, nullptr, &api->instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        *why =
            "no Vulkan driver on this machine (the loader found none; install the GPU's "
            "driver, or mesa-vulkan-drivers for Mesa's and lavapipe)";
        delete api;
        return nullptr;
    }
    if (r != VK_SUCCESS) {
        *why = std::string("vkCreateInstance failed: ") + result_name(r);
        delete api;
        return nullptr;
    }
#define ETUDE_VK_LOAD(name)                                                      \
    api->name = reinterpret_cast<PFN_##name>(get(api->instance, #name));         \
    if (!api->name) {                                                            \
        *why = "the Vulkan loader lacks " #name;                                 \
        return nullptr; /* the half-made instance is left: nothing can use it */ \
    }
    ETUDE_VK_INSTANCE_FUNCTIONS(ETUDE_VK_LOAD)
#undef ETUDE_VK_LOAD
    return api;
}

}  // namespace

const InstanceApi* instance_api(std::string* why) {
    // Made once and never destroyed: devices opened from it live in the
    // registry until exit. dlclose is never called for the same reason.
    static std::once_flag once;
    static const InstanceApi* api = nullptr;
    static std::string reason;
    std::call_once(once, [] { api = make_instance(&reason); });
    if (!api && why) *why = reason;
    return api;
}

bool load_device_api(const InstanceApi& api, VkDevice device, DeviceApi* out) {
#define ETUDE_VK_LOAD(name)                                                           \
    out->name = reinterpret_cast<PFN_##name>(api.vkGetDeviceProcAddr(device, #name)); \
    if (!out->name) return false;
    ETUDE_VK_DEVICE_FUNCTIONS(ETUDE_VK_LOAD)
#undef ETUDE_VK_LOAD
    return true;
}

const char* result_name(VkResult r) {
    switch (r) {
#define ETUDE_VK_NAME(x) \
    case x:              \
        return #x;
        ETUDE_VK_NAME(VK_SUCCESS)
        ETUDE_VK_NAME(VK_NOT_READY)
        ETUDE_VK_NAME(VK_TIMEOUT)
        ETUDE_VK_NAME(VK_INCOMPLETE)
        ETUDE_VK_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
        ETUDE_VK_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        ETUDE_VK_NAME(VK_ERROR_INITIALIZATION_FAILED)
        ETUDE_VK_NAME(VK_ERROR_DEVICE_LOST)
        ETUDE_VK_NAME(VK_ERROR_MEMORY_MAP_FAILED)
        ETUDE_VK_NAME(VK_ERROR_LAYER_NOT_PRESENT)
        ETUDE_VK_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
        ETUDE_VK_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
        ETUDE_VK_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
        ETUDE_VK_NAME(VK_ERROR_TOO_MANY_OBJECTS)
        ETUDE_VK_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
        ETUDE_VK_NAME(VK_ERROR_FRAGMENTED_POOL)
        ETUDE_VK_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
        ETUDE_VK_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        ETUDE_VK_NAME(VK_ERROR_FRAGMENTATION)
        ETUDE_VK_NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        ETUDE_VK_NAME(VK_ERROR_INVALID_SHADER_NV)
#undef ETUDE_VK_NAME
        default:
            return "VK_ERROR_UNKNOWN";
    }
}

}  // namespace etude::gpu::vk
