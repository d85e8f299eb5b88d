#include "gpu/registry.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/device_probe.h"
#include "gpu/opencl/opencl_devices.h"
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {
namespace {

bool file_exists(const char* path);

// ---- CUDA: the module libetude_cuda.so, loaded at run time ----

struct CudaModule {
    using ListFn = bool (*)(std::vector<DeviceInfo>*, std::string*);
    using OpenFn = Backend* (*)(int, std::string*);
    ListFn list = nullptr;
    OpenFn open = nullptr;
    std::string why;  // when it could not be loaded
};

// Loads libetude_cuda.so once, which is only there when CUDA was built. It
// is never unloaded: backends it created may live until exit.
const CudaModule& cuda_module() {
    static const CudaModule loaded = [] {
        CudaModule m;
        const char* named = std::getenv("ETUDE_CUDA_MODULE");
        m.why = "this build has no CUDA backend module";
        for (const std::string& candidate : cuda_module_candidates(named, cuda_module_folder())) {
            const char* path = candidate.c_str();
            if (!file_exists(path)) {
                if (named && *named)
                    m.why = "ETUDE_CUDA_MODULE names " + candidate +
                            ", which does not exist (docs/backends.md: the CUDA module)";
                continue;
            }
            void* h = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                m.why = std::string("cannot load ") + path + ": " + ::dlerror();
                continue;
            }
            m.list = reinterpret_cast<CudaModule::ListFn>(::dlsym(h, "etude_cuda_list_devices"));
            m.open = reinterpret_cast<CudaModule::OpenFn>(::dlsym(h, "etude_cuda_open_device"));
            if (m.list && m.open) return m;
            m.why = std::string(path) + " lacks the CUDA entry points";
            m.list = nullptr;
            m.open = nullptr;
        }
        return m;
    }();
    return loaded;
}

std::vector<DeviceInfo> detect_cuda(std::vector<std::string>& notes) {
    const CudaModule& m = cuda_module();
    std::vector<DeviceInfo> cuda;
    if (!m.list) {
        notes.push_back("CUDA: " + m.why);
        return cuda;
    }
    std::string note;
    if (!m.list(&cuda, &note)) notes.push_back(note.empty() ? "CUDA: unavailable" : note);
    return cuda;
}

std::shared_ptr<Backend> open_cuda(int index) {
    std::string error;
    Backend* raw = cuda_module().open ? cuda_module().open(index, &error) : nullptr;
    if (!raw) throw DeviceError("cannot open CUDA device " + std::to_string(index) + ": " + error);
    return std::shared_ptr<Backend>(raw);
}

// ---- the other backends: their folders' entry points ----

std::shared_ptr<Backend> open_opencl(int index) {
    return std::shared_ptr<Backend>(open_opencl_device(index));
}
std::shared_ptr<Backend> open_vulkan(int index) {
    return std::shared_ptr<Backend>(open_vulkan_device(index));
}
std::vector<DeviceInfo> detect_cpu(std::vector<std::string>&) {
    return {shared_cpu_backend()->info()};
}
std::shared_ptr<Backend> open_cpu(int) {
    return shared_cpu_backend();
}

// A backend module as the registry sees it, as PortAudio keeps its host
// APIs: a name (as --backend spells it), a label for messages, where its
// devices rank, detection (the devices, or notes saying why there are none;
// it may throw, which becomes a note too) and opening one device. Adding a
// backend is its folder, a BackendKind and a line here; nothing else in the
// registry changes.
struct BackendModule {
    BackendKind kind;
    const char* name;
    const char* label;
    // Best first. The ranking and its reasons are in docs/backends.md: CUDA
    // (cuBLAS and cuFFT), then Vulkan GPUs (the vendors' main compute path
    // on every desktop driver), then OpenCL GPUs, then devices that run on
    // the host's own cores (lavapipe, PoCL), then the CPU backend. "auto"
    // never uses the ones on the host's cores (engine/scheduling/device_choice.h).
    int gpu_rank, host_rank;
    std::vector<DeviceInfo> (*detect)(std::vector<std::string>& notes);
    std::shared_ptr<Backend> (*open)(int index);
};

const BackendModule kModules[] = {
    {BackendKind::Cuda, "cuda", "CUDA", 0, 0, detect_cuda, open_cuda},
    {BackendKind::OpenCl, "opencl", "OpenCL", 2, 4, list_opencl_devices, open_opencl},
    {BackendKind::Vulkan, "vulkan", "Vulkan", 1, 3, list_vulkan_devices, open_vulkan},
    {BackendKind::Cpu, "cpu", "CPU", 5, 5, detect_cpu, open_cpu},
};

const BackendModule& module_of(BackendKind kind) {
    for (const BackendModule& m : kModules)
        if (m.kind == kind) return m;
    return kModules[std::size(kModules) - 1];  // every kind has an entry
}

int rank(const DeviceInfo& d) {
    const BackendModule& m = module_of(d.kind);
    return d.is_gpu ? m.gpu_rank : m.host_rank;
}

const char* kind_label(BackendKind kind) {
    return module_of(kind).label;
}

bool file_exists(const char* path) {
    struct stat st;
    return path && *path && ::stat(path, &st) == 0;
}

// The device of `kind` a request names, among those found of that kind.
DeviceInfo one_of(BackendKind kind, const std::vector<DeviceInfo>& of_kind,
                  const BackendRequest& request) {
    if (request.device < 0) return of_kind.front();
    for (const auto& d : of_kind)
        if (d.index == request.device) return d;
    // Named by the device index alone: the option that gave it is
    // --gpu-device in etude say, jack and serve, --device in etude vocode.
    throw std::invalid_argument("there is no " + std::string(kind_label(kind)) + " device " +
                                std::to_string(request.device) + "; found " +
                                std::to_string(of_kind.size()) + " (see 'etude devices')");
}

// A module's devices, or notes saying why there are none.
void detect_module(const BackendModule& m, DetectedDevices& found) {
    try {
        auto devices = m.detect(found.notes);
        found.devices.insert(found.devices.end(), devices.begin(), devices.end());
    } catch (const std::exception& e) {
        found.notes.push_back(std::string(m.label) + ": " + e.what());
    }
}

// Whether the NVIDIA driver is in this process already (RTLD_NOLOAD loads
// nothing; the reference it takes is given back at once).
bool cuda_driver_loaded() {
    void* h = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) ::dlclose(h);
    return h != nullptr;
}

}  // namespace

std::vector<std::string> cuda_module_candidates(const char* named,
                                                const std::string& beside_folder) {
    if (named && *named) return {named};
    std::vector<std::string> paths;
    if (!beside_folder.empty()) paths.push_back(beside_folder + "/libetude_cuda.so");
    paths.push_back(ETUDE_CUDA_MODULE_BUILD_PATH);
    paths.push_back(ETUDE_CUDA_MODULE_INSTALL_PATH);
    return paths;
}

std::string cuda_module_folder() {
    Dl_info info{};
    // Any function of this file: dladdr names the object it was linked into.
    if (::dladdr(reinterpret_cast<void*>(&cuda_module_folder), &info) == 0 || !info.dli_fname)
        return {};
    std::string path = info.dli_fname;
    // A program started by a bare name is named without a folder; its own
    // path is /proc/self/exe.
    if (path.find('/') == std::string::npos) {
        char self[4096];
        const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return {};
        path.assign(self, static_cast<std::size_t>(n));
    }
    const auto slash = path.rfind('/');
    return slash == 0 ? "/" : path.substr(0, slash);
}

BackendRequest parse_backend_request(const std::string& kind, int device) {
    if (kind == "auto") return {kind, device};
    std::vector<std::string> names;
    for (const BackendModule& m : kModules) {
        if (kind == m.name) return {kind, device};
        names.emplace_back(m.name);
    }
    std::sort(names.begin(), names.end());
    std::string choices = "auto";
    for (std::size_t i = 0; i < names.size(); ++i)
        choices += (i + 1 == names.size() ? " or " : ", ") + names[i];
    throw std::invalid_argument("unknown backend '" + kind + "' (choose " + choices + ")");
}

BackendRequest with_environment(BackendRequest r) {
    if (r.kind == "auto")
        if (const char* env = std::getenv("ETUDE_BACKEND"); env && *env)
            r = parse_backend_request(env, r.device);
    if (r.device < 0)
        if (const char* env = std::getenv("ETUDE_DEVICE"); env && *env) r.device = std::atoi(env);
    return r;
}

// What the registry keeps of the devices it opened.
struct DeviceRegistry::Impl {
    std::mutex mu;
    std::map<std::pair<int, int>, std::shared_ptr<Backend>> opened;
    bool profiling = false;                         // for the backends opened from now on
    MathPrecision precision = MathPrecision::Fp32;  // likewise
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

void DeviceRegistry::detect_now() const {
    // The CPU's entry here; every other backend's in a child process
    // (gpu/device_probe.h says why), or here when no child can be made.
    // CUDA stays here when this process has the NVIDIA driver loaded
    // already (someone else uses CUDA): a forked child cannot use a CUDA
    // its parent has begun, and the driver's cost is paid.
    const bool cuda_here = cuda_driver_loaded();
    const auto detect_drivers = [cuda_here] {
        DetectedDevices found;
        for (const BackendModule& m : kModules)
            if (m.kind != BackendKind::Cpu && !(cuda_here && m.kind == BackendKind::Cuda))
                detect_module(m, found);
        return found;
    };
    DetectedDevices found;
    if (auto in_child = detect_in_child(detect_drivers))
        found = std::move(*in_child);
    else
        found = detect_drivers();
    for (const BackendModule& m : kModules)
        if (m.kind == BackendKind::Cpu || (cuda_here && m.kind == BackendKind::Cuda))
            detect_module(m, found);
    devices_ = std::move(found.devices);
    notes_ = std::move(found.notes);
    std::stable_sort(devices_.begin(), devices_.end(),
                     [](const DeviceInfo& a, const DeviceInfo& b) { return rank(a) < rank(b); });
}

DeviceInfo DeviceRegistry::resolve(const BackendRequest& request) const {
    // The CPU is always there: asking for it detects nothing.
    if (request.kind == "cpu") {
        std::vector<std::string> none;
        return one_of(BackendKind::Cpu, detect_cpu(none), request);
    }
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
    for (const BackendModule& m : kModules)
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
    return one_of(kind, of_kind, request);
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
    b = module_of(d.kind).open(d.index);
    b->set_profiling(impl_->profiling);
    b->set_math_precision(impl_->precision);
    return b;
}

void DeviceRegistry::set_profiling(bool on) {
    std::lock_guard lock(impl_->mu);
    impl_->profiling = on;
    for (auto& [key, backend] : impl_->opened)
        if (backend) backend->set_profiling(on);
    shared_cpu_backend()->set_profiling(on);
}

void DeviceRegistry::set_math_precision(MathPrecision precision) {
    std::lock_guard lock(impl_->mu);
    impl_->precision = precision;
    // A backend without the mode refuses it and stays in Fp32.
    for (auto& [key, backend] : impl_->opened)
        if (backend) backend->set_math_precision(precision);
}

}  // namespace etude::gpu
