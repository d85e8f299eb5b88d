#include "gpu/vulkan/vulkan_memory.h"

#include <algorithm>
#include <memory>
#include <string>

namespace etude::gpu::vk {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{4} << 20;
// Copy offsets are kept to 16 bytes, more than any copy or mapping needs.
constexpr std::size_t kAlign = 16;

bool out_of_memory(VkResult r) {
    return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ||
           r == VK_ERROR_TOO_MANY_OBJECTS;
}

[[noreturn]] void fail(VkResult r, const char* call, std::size_t bytes, const Device& d) {
    const std::string what = std::string("Vulkan ") + call + ": " + result_name(r) +
                             " while allocating " + std::to_string(bytes) + " bytes on " + d.name();
    if (out_of_memory(r)) throw OutOfMemory(what);
    throw DeviceError(what);
}

}  // namespace

Allocation* allocate_buffer(Device& device, std::size_t bytes, bool host_visible) {
    const DeviceApi& fn = device.fn();
    bytes = std::max<std::size_t>(bytes, sizeof(float));  // zero-sized buffers are invalid
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    auto a = std::make_unique<Allocation>();
    a->bytes = bytes;
    VkResult r = fn.vkCreateBuffer(device.handle(), &info, nullptr, &a->buffer);
    if (r != VK_SUCCESS) fail(r, "vkCreateBuffer", bytes, device);
    VkMemoryRequirements req;
    fn.vkGetBufferMemoryRequirements(device.handle(), a->buffer, &req);
    const VkMemoryPropertyFlags wanted =
        host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    std::uint32_t type = device.memory_type(req.memoryTypeBits, wanted);
    if (type == UINT32_MAX && !host_visible) type = device.memory_type(req.memoryTypeBits, 0);
    if (type == UINT32_MAX) {
        fn.vkDestroyBuffer(device.handle(), a->buffer, nullptr);
        throw DeviceError("Vulkan: no memory type for a buffer on " + device.name());
    }
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.pNext = &flags;
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = type;
    const char* call = "vkAllocateMemory";
    r = fn.vkAllocateMemory(device.handle(), &alloc, nullptr, &a->memory);
    if (r == VK_SUCCESS) {
        call = "vkBindBufferMemory";
        r = fn.vkBindBufferMemory(device.handle(), a->buffer, a->memory, 0);
    }
    if (r == VK_SUCCESS && host_visible) {
        call = "vkMapMemory";
        r = fn.vkMapMemory(device.handle(), a->memory, 0, VK_WHOLE_SIZE, 0, &a->mapped);
    }
    if (r != VK_SUCCESS) {
        free_buffer(device, a.release());
        fail(r, call, bytes, device);
    }
    VkBufferDeviceAddressInfo address{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    address.buffer = a->buffer;
    a->address = fn.vkGetBufferDeviceAddress(device.handle(), &address);
    return a.release();
}

void free_buffer(Device& device, Allocation* a) noexcept {
    if (!a) return;
    // Freeing memory unmaps it; the buffer goes first, as it is bound to it.
    if (a->buffer) device.fn().vkDestroyBuffer(device.handle(), a->buffer, nullptr);
    if (a->memory) device.fn().vkFreeMemory(device.handle(), a->memory, nullptr);
    delete a;
}

DeferredFrees::~DeferredFrees() {
    for (const Pending& p : pending_) free_buffer(device_, p.allocation);
}

std::uint64_t DeferredFrees::open_batch() {
    std::lock_guard lock(mu_);
    open_.push_back(next_);
    return next_++;
}

void DeferredFrees::close_batch(std::uint64_t batch) {
    std::lock_guard lock(mu_);
    open_.erase(std::remove(open_.begin(), open_.end(), batch), open_.end());
    collect();
}

void DeferredFrees::free_later(Allocation* a) {
    if (!a) return;
    std::lock_guard lock(mu_);
    pending_.push_back({a, next_ - 1});
    collect();
}

void DeferredFrees::collect() {
    // Batches are numbered in the order they open, so a buffer is free of
    // use once no batch numbered at or below its newest one is still open.
    std::uint64_t oldest_open = UINT64_MAX;
    for (std::uint64_t b : open_) oldest_open = std::min(oldest_open, b);
    std::erase_if(pending_, [&](const Pending& p) {
        if (p.newest_batch >= oldest_open) return false;
        free_buffer(device_, p.allocation);
        return true;
    });
}

StagingArena::~StagingArena() {
    for (Allocation* c : chunks_) free_buffer(device_, c);
}

StagingArena::Slice StagingArena::take(std::size_t bytes) {
    bytes = (bytes + kAlign - 1) / kAlign * kAlign;
    while (chunk_ < chunks_.size() && used_ + bytes > chunks_[chunk_]->bytes) {
        ++chunk_;
        used_ = 0;
    }
    if (chunk_ == chunks_.size()) {
        chunks_.push_back(allocate_buffer(device_, std::max(kChunkBytes, bytes), true));
        used_ = 0;
    }
    Allocation* c = chunks_[chunk_];
    Slice s{c->buffer, used_, static_cast<unsigned char*>(c->mapped) + used_};
    used_ += bytes;
    high_water_ = std::max(high_water_, chunk_ + 1);
    return s;
}

void StagingArena::reset() {
    while (chunks_.size() > std::max<std::size_t>(high_water_, 1)) {
        free_buffer(device_, chunks_.back());
        chunks_.pop_back();
    }
    chunk_ = 0;
    used_ = 0;
    high_water_ = 0;
}

}  // namespace etude::gpu::vk
