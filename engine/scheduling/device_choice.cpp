#include "engine/scheduling/device_choice.h"

namespace etude::engine {

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
    if (tier.choice.use) tier.backend = registry.open(request);
    return tier;
}

std::shared_ptr<gpu::Backend> open_model_backend(const std::string& kind, int device,
                                                 std::string* note) {
    GpuTier tier = open_gpu_tier(kind, device);
    if (note) *note = tier.backend ? tier.choice.note : "CPU (" + tier.choice.note + ")";
    return tier.backend ? std::move(tier.backend) : gpu::shared_cpu_backend();
}

}  // namespace etude::engine
