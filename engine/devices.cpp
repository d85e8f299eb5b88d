// engine/devices.h over the device registry (gpu/registry.h), the GPU tier
// policy (device_choice.h) and the kernel benchmark table (kernel_registry.h).
#include "engine/devices.h"

#include <memory>
#include <stdexcept>

#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/kernel_registry.h"
#include "gpu/registry.h"

namespace etude::engine {
namespace {

gpu::BackendRequest to_gpu(const DeviceRequest& r) {
    return {r.backend, r.device};
}

DeviceRequest from_gpu(const gpu::BackendRequest& r) {
    return {r.kind, r.device};
}

ComputeDevice from_gpu(const gpu::DeviceInfo& d) {
    ComputeDevice c;
    c.backend = gpu::to_string(d.kind);
    c.index = d.index;
    c.name = d.name;
    c.platform = d.platform;
    c.driver = d.driver;
    c.global_memory = d.global_memory;
    c.compute_units = d.compute_units;
    c.is_gpu = d.is_gpu;
    c.capabilities = d.capabilities;
    return c;
}

}  // namespace

DeviceRequest parse_device_request(const std::string& backend, int device) {
    return from_gpu(gpu::parse_backend_request(backend, device));
}

DeviceRequest with_device_environment(DeviceRequest request) {
    return from_gpu(gpu::with_environment(to_gpu(request)));
}

std::vector<ComputeDevice> compute_devices() {
    std::vector<ComputeDevice> devices;
    for (const auto& d : gpu::DeviceRegistry::instance().devices()) devices.push_back(from_gpu(d));
    return devices;
}

std::vector<std::string> device_notes() {
    return gpu::DeviceRegistry::instance().notes();
}

ComputeDevice resolve_device(const DeviceRequest& request) {
    return from_gpu(gpu::DeviceRegistry::instance().resolve(to_gpu(request)));
}

GpuTierPlan plan_gpu_tier(const DeviceRequest& request) {
    const auto gpu_request = to_gpu(request);
    const auto choice =
        choose_gpu_tier(gpu_request, gpu::DeviceRegistry::instance().resolve(gpu_request));
    return {choice.use, from_gpu(choice.device), choice.note};
}

DevicePrecision parse_device_precision(const std::string& name) {
    if (name == "fp32") return DevicePrecision::Fp32;
    if (name == "tf32") return DevicePrecision::Tf32;
    throw std::invalid_argument("unknown precision '" + name + "' (choose fp32 or tf32)");
}

const char* device_precision_name(DevicePrecision precision) {
    return precision == DevicePrecision::Tf32 ? "tf32" : "fp32";
}

void set_device_precision(DevicePrecision precision) {
    gpu::DeviceRegistry::instance().set_math_precision(
        precision == DevicePrecision::Tf32 ? gpu::MathPrecision::Tf32 : gpu::MathPrecision::Fp32);
}

std::vector<KernelTime> device_kernel_times(const DeviceRequest& request) {
    auto& registry = gpu::DeviceRegistry::instance();
    claim_devices_for_this_process(registry.resolve(to_gpu(request)));
    const auto backend = registry.open(to_gpu(request));
    std::vector<KernelTime> times;
    for (const auto& t : backend->kernel_timings())
        times.push_back({t.name, t.calls, t.total_ms, t.max_ms});
    return times;
}

KernelCalibration calibrate_kernels(int repeats) {
    auto& registry = gpu::DeviceRegistry::instance();
    KernelCalibration calibration;
    std::vector<std::shared_ptr<gpu::Backend>> backends;
    for (const auto& d : registry.devices()) {
        try {
            claim_devices_for_this_process(d);
            backends.push_back(registry.open({gpu::to_string(d.kind), d.index}));
        } catch (const std::exception& e) {
            calibration.skipped.push_back({gpu::to_string(d.kind), d.index, e.what()});
        }
    }
    KernelRegistry kernels(backends);
    kernels.calibrate(repeats);
    calibration.table = kernels.table();
    return calibration;
}

}  // namespace etude::engine
