#include "gpu/opencl/opencl_devices.h"

#include <CL/cl.h>

#include <string>
#include <utility>

#include "gpu/opencl/opencl_backend.h"

namespace etude::gpu {
namespace {

// Platform error from the ICD loader when it finds no (loadable) ICD; from
// cl_ext.h, spelled out so that header is not needed for one constant.
constexpr cl_int kPlatformNotFoundKhr = -1001;

std::string platform_string(cl_platform_id p, cl_platform_info what) {
    std::size_t size = 0;
    if (clGetPlatformInfo(p, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
    std::string s(size, '\0');
    if (clGetPlatformInfo(p, what, size, s.data(), nullptr) != CL_SUCCESS) return {};
    s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
    return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
    std::size_t size = 0;
    if (clGetDeviceInfo(d, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return {};
    std::string s(size, '\0');
    if (clGetDeviceInfo(d, what, size, s.data(), nullptr) != CL_SUCCESS) return {};
    s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
    return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
    T v{};
    if (clGetDeviceInfo(d, what, sizeof v, &v, nullptr) != CL_SUCCESS) return T{};
    return v;
}

DeviceInfo describe(cl_platform_id p, cl_device_id d, int index) {
    DeviceInfo info;
    info.kind = BackendKind::OpenCl;
    info.index = index;
    info.name = device_string(d, CL_DEVICE_NAME);
    info.vendor = device_string(d, CL_DEVICE_VENDOR);
    info.platform =
        platform_string(p, CL_PLATFORM_NAME) + " " + platform_string(p, CL_PLATFORM_VERSION);
    info.driver = device_string(d, CL_DRIVER_VERSION);
    info.global_memory =
        static_cast<std::size_t>(device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE));
    info.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
    info.is_gpu = (device_value<cl_device_type>(d, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
    // Every op the backend offers works on any OpenCL 1.2 device; the rest
    // depends on what the device reports.
    info.capabilities = {"fft", "gemm"};
    if (device_value<cl_command_queue_properties>(d, CL_DEVICE_QUEUE_PROPERTIES) &
        CL_QUEUE_PROFILING_ENABLE)
        info.capabilities.emplace_back("profiling");
    // Padded with spaces so that a whole-word search cannot match a prefix
    // (built by appending: GCC 12 warns falsely on " " + s + " ").
    std::string extensions(1, ' ');
    extensions += device_string(d, CL_DEVICE_EXTENSIONS);
    extensions += ' ';
    if (extensions.find(" cl_khr_fp64 ") != std::string::npos)
        info.capabilities.emplace_back("fp64");
    return info;
}

struct Found {
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    DeviceInfo info;
};

// Walks every device of every platform in order; the shared numbering of
// list_opencl_devices() and open_opencl_device().
std::vector<Found> enumerate(std::vector<std::string>& notes) {
    std::vector<Found> found;
    cl_uint n_platforms = 0;
    cl_int err = clGetPlatformIDs(0, nullptr, &n_platforms);
    if (err != CL_SUCCESS || n_platforms == 0) {
        notes.push_back(std::string("OpenCL: no platform found (is an ICD such as "
                                    "pocl-opencl-icd installed?)") +
                        (err != CL_SUCCESS && err != kPlatformNotFoundKhr
                             ? std::string(" clGetPlatformIDs: ") + opencl_error_name(err)
                             : std::string()));
        return found;
    }
    std::vector<cl_platform_id> platforms(n_platforms);
    err = clGetPlatformIDs(n_platforms, platforms.data(), nullptr);
    if (err != CL_SUCCESS) {
        notes.push_back(std::string("OpenCL clGetPlatformIDs: ") + opencl_error_name(err));
        return found;
    }
    int index = 0;
    for (cl_platform_id p : platforms) {
        cl_uint n_devices = 0;
        err = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n_devices);
        if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && n_devices == 0)) {
            notes.push_back("OpenCL: platform " + platform_string(p, CL_PLATFORM_NAME) +
                            " has no devices");
            continue;
        }
        if (err != CL_SUCCESS) {
            notes.push_back("OpenCL clGetDeviceIDs: " + std::string(opencl_error_name(err)) +
                            " on platform " + platform_string(p, CL_PLATFORM_NAME));
            continue;
        }
        std::vector<cl_device_id> devices(n_devices);
        err = clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n_devices, devices.data(), nullptr);
        if (err != CL_SUCCESS) {
            notes.push_back("OpenCL clGetDeviceIDs: " + std::string(opencl_error_name(err)) +
                            " on platform " + platform_string(p, CL_PLATFORM_NAME));
            continue;
        }
        for (cl_device_id d : devices) {
            found.push_back({p, d, describe(p, d, index)});
            ++index;
        }
    }
    return found;
}

}  // namespace

std::vector<DeviceInfo> list_opencl_devices(std::vector<std::string>& notes) {
    std::vector<DeviceInfo> out;
    for (auto& f : enumerate(notes)) out.push_back(std::move(f.info));
    return out;
}

std::unique_ptr<Backend> open_opencl_device(int index) {
    std::vector<std::string> notes;
    auto found = enumerate(notes);
    if (index < 0 || index >= static_cast<int>(found.size())) {
        std::string what = "OpenCL: no device " + std::to_string(index) + " (" +
                           std::to_string(found.size()) + " found)";
        for (const auto& n : notes) what += "; " + n;
        throw DeviceError(what);
    }
    auto& f = found[static_cast<std::size_t>(index)];
    return std::make_unique<OpenClBackend>(f.platform, f.device, std::move(f.info));
}

}  // namespace etude::gpu
