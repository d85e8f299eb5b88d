#include "gpu/vulkan/vulkan_queue.h"

#include <cstring>
#include <stdexcept>

namespace etude::gpu::vk {
namespace {

// Timestamp pairs per submission; commands past it run untimed.
constexpr std::uint32_t kTimedCommands = 256;
// How long finish() waits for the device before calling it lost: far longer
// than any batch of this engine's work, short of a hang.
constexpr std::uint64_t kFenceTimeoutNs = 60'000'000'000ull;

void refuse_in_capture(bool capturing, const char* op) {
    if (capturing)
        throw std::invalid_argument(std::string(op) + ": not allowed inside a recording");
}

// This command sees everything the earlier ones wrote (in this batch, or in
// an earlier submission to the device's queue, such as another stream's),
// and writes nothing they still read.
void full_barrier(const DeviceApi& fn, VkCommandBuffer cb) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    fn.vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

CommandStream::CommandStream(Device& device, const Pipelines& pipelines, DeferredFrees& frees)
    : device_(device), pipelines_(pipelines), frees_(frees), staging_(device) {
    const DeviceApi& fn = device.fn();
    VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pool.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
    pool.queueFamilyIndex = device.queue_family();
    VkResult r = fn.vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo cb{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        cb.commandPool = pool_;
        cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        cb.commandBufferCount = 1;
        r = fn.vkAllocateCommandBuffers(device.handle(), &cb, &cb_);
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = fn.vkCreateFence(device.handle(), &fence, nullptr, &fence_);
    }
    if (r == VK_SUCCESS && device.timestamp_period_ns() > 0) {
        VkQueryPoolCreateInfo q{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        q.queryType = VK_QUERY_TYPE_TIMESTAMP;
        q.queryCount = 2 * kTimedCommands;
        // Without timestamps the queue still works; only the times are missing.
        if (fn.vkCreateQueryPool(device.handle(), &q, nullptr, &queries_) != VK_SUCCESS)
            queries_ = VK_NULL_HANDLE;
    }
    if (r != VK_SUCCESS) {
        release();
        const std::string what =
            std::string("Vulkan: creating a queue on ") + device.name() + ": " + result_name(r);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            throw OutOfMemory(what);
        throw DeviceError(what);
    }
}

CommandStream::~CommandStream() {
    release();
}

void CommandStream::release() noexcept {
    const DeviceApi& fn = device_.fn();
    // Nothing may still run on the device when its objects go: wait for a
    // submission that a failed finish() left behind.
    // vkDeviceWaitIdle needs every queue of the device held, as a submission does.
    if (fence_ && !broken_.empty()) {
        std::lock_guard lock(device_.queue_mutex());
        fn.vkDeviceWaitIdle(device_.handle());
    }
    // A batch recorded but never submitted used nothing.
    if (batch_) frees_.close_batch(batch_);
    batch_ = 0;
    capture_ = nullptr;
    replayed_.clear();
    for (Allocation* a : scratch_) free_buffer(device_, a);
    for (Allocation* a : retired_) free_buffer(device_, a);
    scratch_[0] = scratch_[1] = nullptr;
    retired_.clear();
    if (queries_) fn.vkDestroyQueryPool(device_.handle(), queries_, nullptr);
    if (fence_) fn.vkDestroyFence(device_.handle(), fence_, nullptr);
    if (pool_) fn.vkDestroyCommandPool(device_.handle(), pool_, nullptr);
    queries_ = VK_NULL_HANDLE;
    fence_ = VK_NULL_HANDLE;
    pool_ = VK_NULL_HANDLE;
}

void CommandStream::fail(VkResult r, const char* call) {
    broken_ = std::string("Vulkan ") + call + ": " + result_name(r) + " on " + device_.name();
    throw DeviceError(broken_);
}

void CommandStream::check_usable() const {
    if (!broken_.empty()) throw DeviceError(broken_ + " (an earlier failure on this queue)");
}

VkCommandBuffer CommandStream::begin_command(const char* op, const BufferAccess& access) {
    check_usable();
    const DeviceApi& fn = device_.fn();
    if (capture_) {
        if (capture_->plan().next(access)) full_barrier(fn, capture_->commands());
        return capture_->commands();
    }
    open();
    if (plan_.next(access)) full_barrier(fn, cb_);
    const bool timed = time_commands_ && queries_ && timed_ < kTimedCommands;
    recorded_.push_back({op, timed, time_commands_});
    if (timed) fn.vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 2 * timed_);
    return cb_;
}

void CommandStream::open() {
    const DeviceApi& fn = device_.fn();
    if (!recording_) {
        VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        const VkResult r = fn.vkBeginCommandBuffer(cb_, &begin);
        if (r != VK_SUCCESS) fail(r, "vkBeginCommandBuffer");
        if (queries_) fn.vkCmdResetQueryPool(cb_, queries_, 0, 2 * kTimedCommands);
        batch_ = frees_.open_batch();
        recording_ = true;
        timed_ = 0;
        plan_.start();
    }
}

void CommandStream::end_command() {
    if (capture_ || !recorded_.back().timed) return;
    device_.fn().vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                                     2 * timed_ + 1);
    ++timed_;
}

void CommandStream::dispatch(Kernel k, const void* args, std::uint32_t bytes,
                             std::uint32_t groups_x, std::uint32_t groups_y, const char* op,
                             const BufferAccess& access, std::uint32_t groups_z) {
    const VkCommandBuffer cb = begin_command(op, access);
    const DeviceApi& fn = device_.fn();
    fn.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_[k]);
    fn.vkCmdPushConstants(cb, pipelines_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, args);
    fn.vkCmdDispatch(cb, groups_x, groups_y, groups_z);
    end_command();
}

void CommandStream::record_copy(VkBuffer src, VkBuffer dst, const VkBufferCopy* regions,
                                std::uint32_t count, const char* op, const BufferAccess& access) {
    const VkCommandBuffer cb = begin_command(op, access);
    device_.fn().vkCmdCopyBuffer(cb, src, dst, count, regions);
    end_command();
}

void CommandStream::copy(const Allocation& src, const Allocation& dst, const VkBufferCopy* regions,
                         std::uint32_t count, const char* op) {
    record_copy(src.buffer, dst.buffer, regions, count, op, {{src.address}, {dst.address}});
}

void CommandStream::fill(const Allocation& dst, VkDeviceSize bytes, std::uint32_t pattern,
                         const char* op) {
    const VkCommandBuffer cb = begin_command(op, {{}, {dst.address}});
    device_.fn().vkCmdFillBuffer(cb, dst.buffer, 0, bytes, pattern);
    end_command();
}

// The staging slices are the host's side: each is this command's alone
// until finish(), and finish()'s last barrier makes the downloads'
// visible to the host, so only the device buffer is named.
void CommandStream::upload(const void* src, const Allocation& dst, VkDeviceSize dst_offset,
                           std::size_t bytes) {
    check_usable();
    refuse_in_capture(capture_ != nullptr, "h2d");
    const StagingArena::Slice s = staging_.take(bytes);
    std::memcpy(s.host, src, bytes);
    const VkBufferCopy region{s.offset, dst_offset, bytes};
    record_copy(s.buffer, dst.buffer, &region, 1, "h2d", {{}, {dst.address}});
}

void CommandStream::download(const Allocation& src, VkDeviceSize src_offset, void* dst,
                             std::size_t bytes) {
    check_usable();
    refuse_in_capture(capture_ != nullptr, "d2h");
    const StagingArena::Slice s = staging_.take(bytes);
    const VkBufferCopy region{src_offset, s.offset, bytes};
    record_copy(src.buffer, s.buffer, &region, 1, "d2h", {{src.address}, {}});
    downloads_.push_back({s.host, dst, bytes});
}

VkDeviceAddress CommandStream::scratch(int slot, std::size_t bytes) {
    if (capture_) return capture_->scratch(slot, bytes);
    Allocation*& a = scratch_[slot];
    if (!a || a->bytes < bytes) {
        if (a) retired_.push_back(a);
        a = nullptr;
        a = allocate_buffer(device_, bytes, false);
    }
    return a->address;
}

void CommandStream::begin_capture(std::shared_ptr<RecordedCommands> into) {
    check_usable();
    refuse_in_capture(capture_ != nullptr, "record");
    capture_ = std::move(into);
}

std::shared_ptr<RecordedCommands> CommandStream::end_capture() {
    std::shared_ptr<RecordedCommands> done = std::move(capture_);
    capture_ = nullptr;
    if (done) done->end();
    return done;
}

void CommandStream::abort_capture() noexcept {
    capture_ = nullptr;
}

void CommandStream::replay(std::shared_ptr<RecordedCommands> commands, const char* op) {
    refuse_in_capture(capture_ != nullptr, op);
    const VkCommandBuffer secondary = commands->commands();
    // No barrier of its own needed before it: the recording's first
    // command has one (see vulkan_recording.h).
    begin_command(op, {});
    device_.fn().vkCmdExecuteCommands(cb_, 1, &secondary);
    end_command();
    // What the recording wrote is unknown to this queue's plan: the next
    // command waits for all of it.
    plan_.start();
    replayed_.push_back(std::move(commands));
}

void CommandStream::finish(std::vector<TimedCommand>& timings) {
    check_usable();
    refuse_in_capture(capture_ != nullptr, "synchronize");
    if (!recording_) return;
    const DeviceApi& fn = device_.fn();
    // The downloads' staging memory is read by the host after the fence.
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    fn.vkCmdPipelineBarrier(cb_,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
    VkResult r = fn.vkEndCommandBuffer(cb_);
    if (r != VK_SUCCESS) fail(r, "vkEndCommandBuffer");
    VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &cb_;
    {
        std::lock_guard lock(device_.queue_mutex());
        r = fn.vkQueueSubmit(device_.queue(), 1, &submit, fence_);
    }
    if (r != VK_SUCCESS) fail(r, "vkQueueSubmit");
    r = fn.vkWaitForFences(device_.handle(), 1, &fence_, VK_TRUE, kFenceTimeoutNs);
    if (r != VK_SUCCESS) fail(r, "vkWaitForFences");
    r = fn.vkResetFences(device_.handle(), 1, &fence_);
    if (r != VK_SUCCESS) fail(r, "vkResetFences");
    recording_ = false;
    frees_.close_batch(batch_);
    batch_ = 0;

    for (const Download& d : downloads_) std::memcpy(d.to, d.from, d.bytes);
    downloads_.clear();
    std::vector<std::uint64_t> ticks(2 * std::size_t(timed_));
    const bool have_times =
        timed_ > 0 &&
        fn.vkGetQueryPoolResults(device_.handle(), queries_, 0, 2 * timed_,
                                 ticks.size() * sizeof(std::uint64_t), ticks.data(),
                                 sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT) == VK_SUCCESS;
    std::uint32_t t = 0;
    for (const Command& c : recorded_) {
        double ms = -1.0;
        if (c.timed && have_times) {
            const std::uint64_t a = ticks[2 * t], b = ticks[2 * t + 1];
            ms = b >= a ? double(b - a) * device_.timestamp_period_ns() * 1e-6 : 0.0;
        }
        if (c.timed) ++t;
        if (c.profiled) timings.push_back({c.name, ms});
    }
    recorded_.clear();
    r = fn.vkResetCommandPool(device_.handle(), pool_, 0);
    if (r != VK_SUCCESS) fail(r, "vkResetCommandPool");
    staging_.reset();
    for (Allocation* a : retired_) free_buffer(device_, a);
    retired_.clear();
    replayed_.clear();
}

}  // namespace etude::gpu::vk
