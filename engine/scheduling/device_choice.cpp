#include "engine/scheduling/device_choice.h"

#include <atomic>
#include <cstdint>

#include "rt/fork_generation.h"

namespace etude::engine {
namespace {

// (An atomic, not a lock: a lock another thread held at the fork would
// stay held in the child.)
std::atomic<std::int64_t> devices_opened_in{-1};  // the fork generation; -1: none opened

}  // namespace

void claim_devices_for_this_process(const gpu::DeviceInfo& device) {
    if (device.kind == gpu::BackendKind::Cpu) return;  // the process's own: no driver threads
    const auto here = static_cast<std::int64_t>(rt::fork_generation());
    std::int64_t first = -1;
    if (devices_opened_in.compare_exchange_strong(first, here) || first == here) return;
    throw gpu::DeviceError(std::string(gpu::to_string(device.kind)) + " " + device.name +
                           " was opened before this process forked, and its driver's threads "
                           "are not in this process: the CPU does the work here");
}

bool devices_were_opened() {
    return devices_opened_in.load() >= 0;
}

GpuTierChoice choose_gpu_tier(const gpu::BackendRequest& request, const gpu::DeviceInfo& resolved) {
    GpuTierChoice c;
    c.device = resolved;
    c.named = request.kind != "auto" || request.device >= 0;
    if (resolved.kind == gpu::BackendKind::Cpu) {
        c.note = request.kind == "cpu" ? "the CPU backend was requested" : "no GPU found";
        return c;
    }
    if (!c.named && !resolved.is_gpu) {
        c.note = resolved.name + " is not a GPU";
        return c;
    }
    c.use = true;
    c.note = std::string(gpu::to_string(resolved.kind)) + " " + resolved.name;
    return c;
}

GpuTier open_gpu_tier(const std::string& kind, int device) {
    auto& registry = gpu::DeviceRegistry::instance();
    const auto request = gpu::with_environment(gpu::parse_backend_request(kind, device));
    GpuTier tier;
    tier.choice = choose_gpu_tier(request, registry.resolve(request));
    if (tier.choice.use) {
        claim_devices_for_this_process(tier.choice.device);
        tier.backend = registry.open(request);
    }
    return tier;
}

std::shared_ptr<gpu::Backend> open_model_backend(const std::string& kind, int device,
                                                 std::string* note) {
    GpuTier tier = open_gpu_tier(kind, device);
    if (note) *note = tier.backend ? tier.choice.note : "CPU (" + tier.choice.note + ")";
    return tier.backend ? std::move(tier.backend) : gpu::shared_cpu_backend();
}

}  // namespace etude::engine
