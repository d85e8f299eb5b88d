// Vulkan memory for the backend: one VkBuffer with its own memory per
// allocation (gpu::MemoryPool above reuses them, which keeps the count of
// allocations, which drivers limit, low), addressed by the shaders through
// its device address; and a per-queue staging arena of host-visible memory
// that copies between the host and the device go through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gpu/vulkan/vulkan_device.h"

namespace etude::gpu::vk {

// What a DeviceBuffer's handle points to on this backend.
struct Allocation {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceAddress address = 0;
    std::size_t bytes = 0;
    void* mapped = nullptr;  // host-visible allocations only
};

// Device-local memory (host-visible and mapped when `host_visible`). Throws
// gpu::OutOfMemory when the device has no room (or the size is past what one
// allocation may be), DeviceError for any other failure.
Allocation* allocate_buffer(Device& device, std::size_t bytes, bool host_visible);
void free_buffer(Device& device, Allocation* a) noexcept;

// Frees that wait for the device. A Vulkan buffer must outlive every
// command that uses it, but gpu::Backend lets a caller free a buffer as soon
// as its last operation is queued (OpenCL and CUDA keep it alive until
// then); here commands run only when their queue synchronises. So each
// queue's batch of commands is numbered when its recording starts, and a
// freed buffer is destroyed only once every batch that was open when it was
// freed has finished (or been dropped). Thread-safe.
class DeferredFrees {
  public:
    explicit DeferredFrees(Device& device) : device_(device) {}
    ~DeferredFrees();  // frees everything: the device is idle by then
    DeferredFrees(const DeferredFrees&) = delete;
    DeferredFrees& operator=(const DeferredFrees&) = delete;

    std::uint64_t open_batch();
    void close_batch(std::uint64_t batch);
    void free_later(Allocation* a);

  private:
    void collect();  // with mu_ held
    Device& device_;
    std::mutex mu_;
    std::uint64_t next_ = 1;
    std::vector<std::uint64_t> open_;  // batches recording or running
    struct Pending {
        Allocation* allocation;
        std::uint64_t newest_batch;  // the newest batch that may use it
    };
    std::vector<Pending> pending_;
};

// Host-visible chunks handed out front to back while a queue records, and
// reused from the start after the queue has synchronised. Not thread-safe:
// one per queue.
class StagingArena {
  public:
    explicit StagingArena(Device& device) : device_(device) {}
    ~StagingArena();
    StagingArena(const StagingArena&) = delete;
    StagingArena& operator=(const StagingArena&) = delete;

    struct Slice {
        VkBuffer buffer;
        VkDeviceSize offset;
        unsigned char* host;
    };
    // `bytes` of staging, valid until reset(). Throws like allocate_buffer.
    Slice take(std::size_t bytes);
    // Everything taken is free again (the queue has finished with it).
    // Chunks beyond the first are given back when they were not needed
    // since the last reset, so one large copy does not pin memory forever.
    void reset();

  private:
    Device& device_;
    std::vector<Allocation*> chunks_;
    std::size_t chunk_ = 0;  // the chunk being filled
    std::size_t used_ = 0;   // bytes of it handed out
    std::size_t high_water_ = 0;
};

}  // namespace etude::gpu::vk
