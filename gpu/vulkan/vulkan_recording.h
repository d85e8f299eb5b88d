// A Vulkan recording (gpu::Backend::record): the commands of a step in a
// secondary command buffer that is kept, not submitted, and replayed by
// executing it inside a queue's command buffer (vkCmdExecuteCommands), as
// many times as the caller likes. The shaders reach buffers through device
// addresses in push constants, so the commands replay against the same
// allocations, with what those hold at replay time.
//
// Barriers inside follow the barrier plan of the recorded commands, and its
// first command waits for everything before it on the device's queue (the
// plan's fresh start), so a replay is ordered like any command. Scratch
// buffers the commands need (the FFT's) belong to the recording: a queue's
// own are replaced as they grow, which would leave a kept command pointing
// at freed memory.
#pragma once

#include <cstddef>
#include <vector>

#include "gpu/backend.h"
#include "gpu/vulkan/barrier_plan.h"
#include "gpu/vulkan/vulkan_memory.h"

namespace etude::gpu::vk {

class RecordedCommands final : public RecordedWork {
  public:
    // A command pool and a secondary command buffer, begun for recording.
    // Throws DeviceError (OutOfMemory) when Vulkan cannot make them.
    explicit RecordedCommands(Device& device);
    // Nothing may still run it: the queues that replayed it hold it until
    // their submission has finished.
    ~RecordedCommands() override;
    RecordedCommands(const RecordedCommands&) = delete;
    RecordedCommands& operator=(const RecordedCommands&) = delete;

    VkCommandBuffer commands() const { return cb_; }
    BarrierPlan& plan() { return plan_; }
    // A device buffer of at least `bytes` for slot 0 or 1, kept while the
    // recording lives (a smaller one it replaces too: earlier commands use it).
    VkDeviceAddress scratch(int slot, std::size_t bytes);
    // Ends the recording (vkEndCommandBuffer); throws DeviceError.
    void end();

  private:
    void release() noexcept;

    Device& device_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    BarrierPlan plan_;
    Allocation* scratch_[2] = {nullptr, nullptr};
    std::vector<Allocation*> kept_;
};

}  // namespace etude::gpu::vk
