// A device buffer pool: allocations are rounded up to power-of-two size
// classes and given back to per-class free lists on release, so a steady
// workload stops calling the device allocator after warm-up. Tracks current,
// peak and per-tag usage. On out-of-memory it trims its free lists and
// retries once before letting gpu::OutOfMemory through (the caller then hands
// the work to the CPU).
//
// Threads: all methods may be called from any thread (one mutex; this is
// never on the audio path). The pool must outlive the buffers it hands out.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

struct MemoryUsage {
    std::size_t in_use_bytes = 0;  // held by live DeviceBuffers (size-class rounded)
    std::size_t cached_bytes = 0;  // on free lists, ready for reuse
    std::size_t peak_in_use_bytes = 0;
    std::uint64_t device_allocations = 0;  // calls that reached the device allocator
    std::uint64_t reuses = 0;              // requests served from a free list
    std::uint64_t trims = 0;               // out-of-memory recoveries
    std::map<std::string, std::size_t> in_use_by_tag;
};

class MemoryPool final : public MemoryOwner {
  public:
    explicit MemoryPool(Backend& backend) : backend_(backend) {}
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // Throws OutOfMemory only if the device is full even after a trim.
    DeviceBuffer allocate(std::size_t floats, const char* tag);
    // Frees every cached (unused) allocation back to the device.
    void trim();
    MemoryUsage usage() const;
    Backend& backend() { return backend_; }

    static std::size_t size_class(std::size_t bytes);

    void release(void* handle, std::size_t bytes, const char* tag) noexcept override;

  private:
    void trim_locked();

    Backend& backend_;
    mutable std::mutex mu_;
    std::map<std::size_t, std::vector<void*>> free_;  // size class -> cached handles
    MemoryUsage usage_;
};

}  // namespace etude::gpu
