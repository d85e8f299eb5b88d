// A gpu::Queue on a Vulkan device: one command buffer recorded op by op and
// submitted when the queue synchronises, like an OpenCL in-order queue
// whose flush waits for synchronize(). Results are as if commands ran in
// order, which is what gpu::Backend's in-order queues promise: each command
// names the buffers it reads and writes, and a barrier goes before it where
// it depends on a command since the last one (barrier_plan.h), so
// independent commands may overlap on the device.
//
// Copies go through a staging arena of host-visible memory: an upload is
// copied into it when it is recorded (so the caller's memory need only live
// for the call), a download is copied out of it after the fence. While
// the backend profiles, each command is timed with timestamp queries where
// the queue supports them.
// One thread at a time, as every gpu::Queue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/vulkan/barrier_plan.h"
#include "gpu/vulkan/vulkan_memory.h"
#include "gpu/vulkan/vulkan_pipelines.h"
#include "gpu/vulkan/vulkan_recording.h"

namespace etude::gpu::vk {

struct TimedCommand {
    const char* name;
    double ms;  // on the device; negative when it was not timed
};

class CommandStream final : public Queue {
  public:
    // Throws DeviceError (or OutOfMemory) if the command pool cannot be made.
    CommandStream(Device& device, const Pipelines& pipelines, DeferredFrees& frees);
    ~CommandStream() override;

    // Records a dispatch of `k` over groups_x * groups_y * groups_z work-groups, with
    // `args` (a push-constant block of at most Pipelines::kPushBytes) as
    // its arguments; `op` names it in the timings. `access` names every
    // buffer the shader reads and writes through `args`' addresses: one
    // left out can race with the commands around it on a GPU.
    void dispatch(Kernel k, const void* args, std::uint32_t bytes, std::uint32_t groups_x,
                  std::uint32_t groups_y, const char* op, const BufferAccess& access,
                  std::uint32_t groups_z = 1);
    void copy(const Allocation& src, const Allocation& dst, const VkBufferCopy* regions,
              std::uint32_t count, const char* op);
    void fill(const Allocation& dst, VkDeviceSize bytes, std::uint32_t pattern, const char* op);
    void upload(const void* src, const Allocation& dst, VkDeviceSize dst_offset, std::size_t bytes);
    void download(const Allocation& src, VkDeviceSize src_offset, void* dst, std::size_t bytes);

    // Whether the commands recorded from now on are timed (the backend's
    // profiling switch).
    void time_commands(bool on) { time_commands_ = on; }

    // Commands recorded and barriers placed before them, over the queue's
    // life (what the barrier plan saved shows in the ratio).
    std::uint64_t commands() const { return plan_.commands(); }
    std::uint64_t barriers() const { return plan_.barriers(); }

    // A device buffer of at least `bytes` for intermediate results (slot 0
    // or 1), kept by the queue; a smaller one it replaces lives on until
    // the next finish(), since recorded commands may still use it.
    VkDeviceAddress scratch(int slot, std::size_t bytes);

    // Recordings (gpu::Backend::record/replay). Between begin_capture and
    // end_capture (or abort_capture) commands go into `into` instead of the
    // queue's own command buffer, untimed; what the queue had recorded
    // before stays queued. Copies to or from the host are refused
    // (std::invalid_argument), as is finish().
    void begin_capture(std::shared_ptr<RecordedCommands> into);
    std::shared_ptr<RecordedCommands> end_capture();  // throws DeviceError
    void abort_capture() noexcept;
    // Queues a recording's commands, timed as `op` while profiling; the
    // queue keeps the recording alive until its submission has finished.
    void replay(std::shared_ptr<RecordedCommands> commands, const char* op);

    // Submits what was recorded, waits for it, copies the downloads to the
    // host and appends the time of each command recorded while profiling
    // to `timings`. Throws DeviceError
    // (VK_ERROR_DEVICE_LOST, a submission that fails); the queue is then
    // unusable and says so on every later call.
    void finish(std::vector<TimedCommand>& timings);

    const Device& device() const { return device_; }

  private:
    // The command buffer the next command goes into (the capture's while
    // one is open), with a barrier before it where the plan says.
    VkCommandBuffer begin_command(const char* op, const BufferAccess& access);
    void open();  // begins the queue's own command buffer if it is not recording yet
    void check_usable() const;
    void record_copy(VkBuffer src, VkBuffer dst, const VkBufferCopy* regions, std::uint32_t count,
                     const char* op, const BufferAccess& access);
    void end_command();
    [[noreturn]] void fail(VkResult r, const char* call);
    void release() noexcept;  // the destructor's work, also for a failed constructor

    Device& device_;
    const Pipelines& pipelines_;
    DeferredFrees& frees_;
    std::uint64_t batch_ = 0;  // the batch being recorded (frees_), 0 when none
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    VkQueryPool queries_ = VK_NULL_HANDLE;
    StagingArena staging_;
    bool recording_ = false;
    bool time_commands_ = false;
    BarrierPlan plan_;
    std::string broken_;  // why the queue can no longer be used
    struct Command {
        const char* name;
        bool timed;     // has timestamps
        bool profiled;  // recorded while profiling: reported, timed or not
    };
    std::vector<Command> recorded_;
    std::uint32_t timed_ = 0;
    struct Download {
        const unsigned char* from;
        void* to;
        std::size_t bytes;
    };
    std::vector<Download> downloads_;
    Allocation* scratch_[2] = {nullptr, nullptr};
    std::vector<Allocation*> retired_;
    std::shared_ptr<RecordedCommands> capture_;                // open while recording
    std::vector<std::shared_ptr<RecordedCommands>> replayed_;  // until finish()
};

}  // namespace etude::gpu::vk
