#include "gpu/memory_pool.h"

#include <bit>

namespace etude::gpu {

std::size_t MemoryPool::size_class(std::size_t bytes) {
    return std::bit_ceil(std::max<std::size_t>(bytes, 256));
}

MemoryPool::~MemoryPool() {
    std::lock_guard lock(mu_);
    trim_locked();
}

DeviceBuffer MemoryPool::allocate(std::size_t floats, const char* tag) {
    const std::size_t bytes = size_class(std::max<std::size_t>(floats, 1) * sizeof(float));
    std::lock_guard lock(mu_);
    void* handle = nullptr;
    auto& list = free_[bytes];
    if (!list.empty()) {
        handle = list.back();
        list.pop_back();
        usage_.cached_bytes -= bytes;
        ++usage_.reuses;
    } else {
        try {
            handle = backend_.raw_allocate(bytes);
        } catch (const OutOfMemory&) {
            // Give back everything cached and try once more.
            trim_locked();
            ++usage_.trims;
            handle = backend_.raw_allocate(bytes);  // may throw OutOfMemory to the caller
        }
        ++usage_.device_allocations;
    }
    usage_.in_use_bytes += bytes;
    usage_.peak_in_use_bytes = std::max(usage_.peak_in_use_bytes, usage_.in_use_bytes);
    usage_.in_use_by_tag[tag] += bytes;
    return DeviceBuffer(this, handle, bytes, tag);
}

void MemoryPool::release(void* handle, std::size_t bytes, const char* tag) noexcept {
    std::lock_guard lock(mu_);
    usage_.in_use_bytes -= bytes;
    auto it = usage_.in_use_by_tag.find(tag);
    if (it != usage_.in_use_by_tag.end()) {
        it->second -= bytes;
        if (it->second == 0) usage_.in_use_by_tag.erase(it);
    }
    try {
        free_[bytes].push_back(handle);
        usage_.cached_bytes += bytes;
    } catch (...) {
        backend_.raw_free(handle);  // could not cache it: give it straight back
    }
}

void MemoryPool::trim() {
    std::lock_guard lock(mu_);
    trim_locked();
}

void MemoryPool::trim_locked() {
    for (auto& [bytes, list] : free_) {
        for (void* h : list) backend_.raw_free(h);
        list.clear();
    }
    usage_.cached_bytes = 0;
}

MemoryUsage MemoryPool::usage() const {
    std::lock_guard lock(mu_);
    return usage_;
}

}  // namespace etude::gpu
