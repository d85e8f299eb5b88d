// The Vulkan backend's private state, shared by its three source files
// (vulkan_backend.cpp, vulkan_ops.cpp, vulkan_fft.cpp) and nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "gpu/kernel_timing_table.h"
#include "gpu/vulkan/vulkan_backend.h"
#include "gpu/vulkan/vulkan_device.h"
#include "gpu/vulkan/vulkan_memory.h"
#include "gpu/vulkan/vulkan_pipelines.h"
#include "gpu/vulkan/vulkan_queue.h"

namespace etude::gpu {

struct VulkanBackend::State {
    State(const vk::PhysicalDevice& physical, DeviceInfo i)
        : info(std::move(i)), device(physical), pipelines(device), frees(device) {
        // GEMM and conv1d in shared-memory tiles on GPUs, one invocation per
        // element on the host's cores (gemm_direct.comp says why); each pair
        // sums in one order. ETUDE_VULKAN_KERNELS=tiled|direct picks, so that
        // the tests run the GPUs' shaders on lavapipe too.
        const char* kernels = std::getenv("ETUDE_VULKAN_KERNELS");
        tiled = kernels && *kernels ? std::string(kernels) == "tiled" : info.is_gpu;
    }
    ~State() {
        // Nothing may still use what is freed below (a queue whose last
        // submission failed may have left work behind).
        {
            std::lock_guard lock(device.queue_mutex());
            device.fn().vkDeviceWaitIdle(device.handle());
        }
        for (auto& [n, table] : twiddles) vk::free_buffer(device, table);
    }

    DeviceInfo info;
    vk::Device device;  // declared before everything made from it
    vk::Pipelines pipelines;
    vk::DeferredFrees frees;  // before the queues' users free anything into it

    bool tiled = true;  // the shared-memory GEMM and conv1d

    KernelTimingTable timings;

    std::mutex fft_mu;
    std::map<int, vk::Allocation*> twiddles;
};

// A DeviceBuffer's allocation on this backend.
inline vk::Allocation& allocation_of(const DeviceBuffer& b) {
    return *static_cast<vk::Allocation*>(b.handle());
}

template <class F>
void VulkanBackend::guarded(F&& record) {
    try {
        record();
    } catch (const OutOfMemory&) {
        throw;  // recoverable: the caller trims a pool or falls back
    } catch (const DeviceError& e) {
        mark_failed(e.what());
        throw;
    }
}

// Element-wise shaders run 256 invocations per group (element_launch.glsl)
// and at most 65535 groups, the least maxComputeWorkGroupCount[0] a device
// may have; the shaders' grid-stride loops cover the rest.
template <class Args>
void VulkanBackend::launch(vk::CommandStream& s, vk::Kernel kernel, const Args& args,
                           std::uint64_t n, const char* op, const vk::BufferAccess& access) {
    static_assert(sizeof(Args) <= vk::Pipelines::kPushBytes);
    const std::uint64_t groups = std::min<std::uint64_t>((n + 255) / 256, 65535);
    guarded([&] {
        s.dispatch(kernel, &args, sizeof(Args),
                   static_cast<std::uint32_t>(std::max<std::uint64_t>(groups, 1)), 1, op, access);
    });
}

}  // namespace etude::gpu
