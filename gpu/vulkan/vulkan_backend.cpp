#include "gpu/vulkan/vulkan_backend.h"

#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "gpu/vulkan/vulkan_backend_state.h"
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {

std::vector<DeviceInfo> list_vulkan_devices(std::vector<std::string>& notes) {
    std::string why;
    const auto physical = vk::physical_devices(&why);
    if (physical.empty()) {
        notes.push_back("Vulkan: " + why);
        return {};
    }
    std::vector<DeviceInfo> out;
    int usable = 0;
    for (const auto& pd : physical) {
        if (!pd.unusable.empty()) {
            notes.push_back("Vulkan: " + pd.info.name + " " + pd.unusable + "; not used");
            continue;
        }
        DeviceInfo info = pd.info;
        info.index = usable++;
        out.push_back(std::move(info));
    }
    return out;
}

std::unique_ptr<Backend> open_vulkan_device(int index) {
    std::string why;
    const auto physical = vk::physical_devices(&why);
    int usable = 0;
    for (const auto& pd : physical) {
        if (!pd.unusable.empty()) continue;
        if (usable++ != index) continue;
        DeviceInfo info = pd.info;
        info.index = index;
        return std::make_unique<VulkanBackend>(pd, std::move(info));
    }
    throw DeviceError("there is no Vulkan device " + std::to_string(index) + "; found " +
                      std::to_string(usable) + (why.empty() ? "" : " (" + why + ")"));
}

VulkanBackend::VulkanBackend(const vk::PhysicalDevice& physical, DeviceInfo info)
    : s_(std::make_unique<State>(physical, std::move(info))) {}

VulkanBackend::~VulkanBackend() = default;

const DeviceInfo& VulkanBackend::info() const {
    return s_->info;
}

vk::CommandStream& VulkanBackend::stream_of(Queue& q, const char* op) const {
    auto* s = dynamic_cast<vk::CommandStream*>(&q);
    if (!s || &s->device() != &s_->device)
        throw std::invalid_argument(std::string(op) + ": the queue is not one of this device's");
    return *s;
}

vk::CommandStream& VulkanBackend::begin(Queue& q, const char* op) {
    vk::CommandStream& s = stream_of(q, op);
    const double late_ms = consume_fault(op);
    if (late_ms > 0)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
    s.time_commands(profiling());
    return s;
}

void* VulkanBackend::raw_allocate(std::size_t bytes) {
    consume_fault("allocate");
    if (bytes > s_->info.global_memory)
        throw OutOfMemory("Vulkan: " + std::to_string(bytes) + " bytes is more than " +
                          s_->info.name + " has (" + std::to_string(s_->info.global_memory) + ")");
    vk::Allocation* a = nullptr;
    guarded([&] { a = vk::allocate_buffer(s_->device, bytes, false); });
    return a;
}

void VulkanBackend::raw_free(void* handle) noexcept {
    s_->frees.free_later(static_cast<vk::Allocation*>(handle));
}

float* VulkanBackend::allocate_pinned(std::size_t floats) {
    consume_fault("allocate");
    const std::size_t bytes = (std::max<std::size_t>(floats, 1) * sizeof(float) + 63) / 64 * 64;
    auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
    if (!p) throw OutOfMemory("Vulkan: no host memory for " + std::to_string(bytes) + " bytes");
    return p;
}

void VulkanBackend::free_pinned(float* p) noexcept {
    std::free(p);
}

std::unique_ptr<Queue> VulkanBackend::create_queue() {
    std::unique_ptr<Queue> q;
    guarded([&] { q = std::make_unique<vk::CommandStream>(s_->device, s_->pipelines, s_->frees); });
    return q;
}

void VulkanBackend::synchronize(Queue& q) {
    refuse_while_recording(q, "synchronize");
    vk::CommandStream& s = stream_of(q, "synchronize");
    std::vector<vk::TimedCommand> times;
    guarded([&] { s.finish(times); });
    for (const auto& t : times) s_->timings.record(t.name, t.ms);
}

bool VulkanBackend::begin_recording_impl(Queue& q) {
    vk::CommandStream& s = stream_of(q, "record");
    guarded([&] { s.begin_capture(std::make_shared<vk::RecordedCommands>(s_->device)); });
    return true;
}

std::shared_ptr<RecordedWork> VulkanBackend::end_recording_impl(Queue& q) {
    std::shared_ptr<RecordedWork> work;
    guarded([&] { work = stream_of(q, "record").end_capture(); });
    return work;
}

void VulkanBackend::abort_recording_impl(Queue& q) noexcept {
    if (auto* s = dynamic_cast<vk::CommandStream*>(&q)) s->abort_capture();
}

void VulkanBackend::replay_impl(Queue& q, const std::shared_ptr<RecordedWork>& work) {
    vk::CommandStream& s = begin(q, "replay");
    auto commands = std::dynamic_pointer_cast<vk::RecordedCommands>(work);
    if (!commands) throw std::invalid_argument("replay: not a Vulkan recording");
    guarded([&] { s.replay(std::move(commands), "replay"); });
}

std::vector<KernelTiming> VulkanBackend::kernel_timings() const {
    return s_->timings.snapshot();
}

void VulkanBackend::reset_timings() {
    s_->timings.clear();
}

}  // namespace etude::gpu
