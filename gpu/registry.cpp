#include "gpu/registry.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/opencl/opencl_devices.h"
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {
namespace {

// Best first (the reasons are in docs/backends.md): CUDA (cuBLAS and cuFFT),
// then Vulkan GPUs (the vendors' main compute path on every desktop driver),
// then OpenCL GPUs, then devices that run on the host's own cores (lavapipe,
// PoCL), then the CPU backend. "auto" never uses the ones on the host's
// cores (engine/device_choice.h); they are there to be named.
int rank(const DeviceInfo& d) {
    if (d.kind == BackendKind::Cuda) return 0;
    if (d.kind == BackendKind::Vulkan && d.is_gpu) return 1;
    if (d.kind == BackendKind::OpenCl && d.is_gpu) return 2;
    if (d.kind == BackendKind::Vulkan) return 3;
    if (d.kind == BackendKind::OpenCl) return 4;
    return 5;
}

bool file_exists(const char* path) {
    struct stat st;
    return path && *path && ::stat(path, &st) == 0;
}

const char* kind_label(BackendKind k) {
    switch (k) {
        case BackendKind::Cpu:
            return "CPU";
        case BackendKind::OpenCl:
            return "OpenCL";
        case BackendKind::Cuda:
            return "CUDA";
        case BackendKind::Vulkan:
            return "Vulkan";
    }
    return "?";
}

}  // namespace

BackendRequest parse_backend_request(const std::string& kind, int device) {
    if (kind != "auto" && kind != "cpu" && kind != "cuda" && kind != "opencl" && kind != "vulkan")
        throw std::invalid_argument("unknown backend '" + kind +
                                    "' (choose auto, cpu, cuda, opencl or vulkan)");
    return {kind, device};
}

BackendRequest with_environment(BackendRequest r) {
    if (r.kind == "auto")
        if (const char* env = std::getenv("ETUDE_BACKEND"); env && *env)
            r = parse_backend_request(env, r.device);
    if (r.device < 0)
        if (const char* env = std::getenv("ETUDE_DEVICE"); env && *env) r.device = std::atoi(env);
    return r;
}

struct DeviceRegistry::Impl {
    using ListFn = bool (*)(std::vector<DeviceInfo>*, std::string*);
    using OpenFn = Backend* (*)(int, std::string*);
    std::mutex mu;
    std::map<std::pair<int, int>, std::shared_ptr<Backend>> opened;
    ListFn cuda_list = nullptr;
    OpenFn cuda_open = nullptr;

    // Loads libetude_cuda.so, which is only there when CUDA was built. It is
    // never unloaded: backends it created may live until exit.
    void load_cuda(std::vector<std::string>& notes) {
        const char* candidates[] = {std::getenv("ETUDE_CUDA_MODULE"), ETUDE_CUDA_MODULE_BUILD_PATH,
                                    ETUDE_CUDA_MODULE_INSTALL_PATH};
        std::string why = "this build has no CUDA backend module";
        for (const char* path : candidates) {
            if (!file_exists(path)) continue;
            void* h = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                why = std::string("cannot load ") + path + ": " + ::dlerror();
                continue;
            }
            cuda_list = reinterpret_cast<ListFn>(::dlsym(h, "etude_cuda_list_devices"));
            cuda_open = reinterpret_cast<OpenFn>(::dlsym(h, "etude_cuda_open_device"));
            if (cuda_list && cuda_open) return;
            why = std::string(path) + " lacks the CUDA entry points";
            cuda_list = nullptr;
            cuda_open = nullptr;
        }
        notes.push_back("CUDA: " + why);
    }
};

DeviceRegistry& DeviceRegistry::instance() {
    // Never destroyed: backends it opened (a CUDA one above all) must not be
    // torn down during static destruction, after the CUDA runtime's own exit
    // handlers have run.
    static DeviceRegistry* registry = new DeviceRegistry;
    return *registry;
}

std::shared_ptr<Backend> shared_cpu_backend() {
    static std::shared_ptr<Backend> cpu = std::make_shared<CpuBackend>();
    return cpu;
}

DeviceRegistry::DeviceRegistry() : impl_(std::make_shared<Impl>()) {}

const std::vector<DeviceInfo>& DeviceRegistry::devices() const {
    detect();
    return devices_;
}

const std::vector<std::string>& DeviceRegistry::notes() const {
    detect();
    return notes_;
}

void DeviceRegistry::detect() const {
    std::call_once(detected_, [this] { detect_now(); });
}

// The backend modules, one entry each, as PortAudio keeps its host APIs: a
// name (as --backend spells it), detection (the devices, or notes saying why
// there are none; it may throw, which becomes a note too) and opening one
// device. Adding a backend means adding an entry here and a folder beside
// gpu/opencl; nothing else in the registry changes.
struct DeviceRegistry::Module {
    BackendKind kind;
    const char* name;
    std::vector<DeviceInfo> (*detect)(Impl& impl, std::vector<std::string>& notes);
    std::shared_ptr<Backend> (*open)(Impl& impl, int index);
};

namespace {

std::vector<DeviceInfo> detect_cuda(DeviceRegistry::Impl& impl, std::vector<std::string>& notes);
std::shared_ptr<Backend> open_cuda(DeviceRegistry::Impl& impl, int index);

std::vector<DeviceInfo> detect_opencl(DeviceRegistry::Impl&, std::vector<std::string>& notes) {
    return list_opencl_devices(notes);
}
std::shared_ptr<Backend> open_opencl(DeviceRegistry::Impl&, int index) {
    return std::shared_ptr<Backend>(open_opencl_device(index));
}

std::vector<DeviceInfo> detect_vulkan(DeviceRegistry::Impl&, std::vector<std::string>& notes) {
    return list_vulkan_devices(notes);
}
std::shared_ptr<Backend> open_vulkan(DeviceRegistry::Impl&, int index) {
    return std::shared_ptr<Backend>(open_vulkan_device(index));
}

std::vector<DeviceInfo> detect_cpu(DeviceRegistry::Impl&, std::vector<std::string>&) {
    return {shared_cpu_backend()->info()};
}
std::shared_ptr<Backend> open_cpu(DeviceRegistry::Impl&, int) {
    return shared_cpu_backend();
}

}  // namespace

const DeviceRegistry::Module DeviceRegistry::kModules[] = {
    {BackendKind::Cuda, "cuda", detect_cuda, open_cuda},
    {BackendKind::OpenCl, "opencl", detect_opencl, open_opencl},
    {BackendKind::Vulkan, "vulkan", detect_vulkan, open_vulkan},
    {BackendKind::Cpu, "cpu", detect_cpu, open_cpu},
};

namespace {

std::vector<DeviceInfo> detect_cuda(DeviceRegistry::Impl& impl, std::vector<std::string>& notes) {
    impl.load_cuda(notes);
    std::vector<DeviceInfo> cuda;
    if (!impl.cuda_list) return cuda;
    std::string note;
    if (!impl.cuda_list(&cuda, &note)) notes.push_back(note.empty() ? "CUDA: unavailable" : note);
    return cuda;
}

std::shared_ptr<Backend> open_cuda(DeviceRegistry::Impl& impl, int index) {
    std::string error;
    Backend* raw = impl.cuda_open ? impl.cuda_open(index, &error) : nullptr;
    if (!raw) throw DeviceError("cannot open CUDA device " + std::to_string(index) + ": " + error);
    return std::shared_ptr<Backend>(raw);
}

}  // namespace

void DeviceRegistry::detect_now() const {
    for (const Module& m : kModules) {
        try {
            auto found = m.detect(*impl_, notes_);
            devices_.insert(devices_.end(), found.begin(), found.end());
        } catch (const std::exception& e) {
            notes_.push_back(std::string(kind_label(m.kind)) + ": " + e.what());
        }
    }
    std::stable_sort(devices_.begin(), devices_.end(),
                     [](const DeviceInfo& a, const DeviceInfo& b) { return rank(a) < rank(b); });
}

DeviceInfo DeviceRegistry::resolve(const BackendRequest& request) const {
    detect();
    if (request.kind == "auto") {
        if (request.device < 0) return devices_.front();
        if (request.device >= static_cast<int>(devices_.size()))
            throw std::invalid_argument("there is no device " + std::to_string(request.device) +
                                        "; there are " + std::to_string(devices_.size()) +
                                        " (see 'etude devices')");
        return devices_[static_cast<std::size_t>(request.device)];
    }
    BackendKind kind = BackendKind::Cpu;
    for (const Module& m : kModules)
        if (request.kind == m.name) kind = m.kind;
    std::vector<DeviceInfo> of_kind;
    for (const auto& d : devices_)
        if (d.kind == kind) of_kind.push_back(d);
    if (of_kind.empty()) {
        std::string why;
        for (const auto& n : notes_)
            if (n.rfind(kind_label(kind), 0) == 0) why = ": " + n;
        throw std::invalid_argument(std::string("no ") + kind_label(kind) + " device" + why);
    }
    if (request.device < 0) return of_kind.front();
    for (const auto& d : of_kind)
        if (d.index == request.device) return d;
    // Named by the device index alone: the option that gave it is
    // --gpu-device in etude say, jack and serve, --device in etude vocode.
    throw std::invalid_argument("there is no " + std::string(kind_label(kind)) + " device " +
                                std::to_string(request.device) + "; found " +
                                std::to_string(of_kind.size()) + " (see 'etude devices')");
}

std::shared_ptr<Backend> DeviceRegistry::cpu() {
    return shared_cpu_backend();
}

std::shared_ptr<Backend> DeviceRegistry::open(const BackendRequest& request) {
    const DeviceInfo d = resolve(request);
    if (d.kind == BackendKind::Cpu) return cpu();
    std::lock_guard lock(impl_->mu);
    auto& b = impl_->opened[{static_cast<int>(d.kind), d.index}];
    if (b) return b;
    for (const Module& m : kModules)
        if (m.kind == d.kind) b = m.open(*impl_, d.index);
    return b;
}

}  // namespace etude::gpu
