// The module's two entry points (see cuda_module.h). Everything else in
// libetude_cuda.so is hidden: the host program has its own copies of the
// gpu/backend.cpp definitions, and the static CUDA runtime must not clash
// with any other copy in the process.
#include "gpu/cuda/cuda_module.h"

#include <cuda_runtime_api.h>

#include <exception>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"

#define ETUDE_CUDA_EXPORT __attribute__((visibility("default")))

namespace etude::gpu {
namespace {

std::string version_string(int v) {
    // CUDA encodes versions as 1000*major + 10*minor.
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

// Here rather than beside the backend: a device is described before any
// backend is opened (etude_cuda_list_devices), and by the backend once it is.
DeviceInfo CudaBackend::describe(int ordinal) {
    auto check = [&](cudaError_t e, const char* call) {
        if (e != cudaSuccess) {
            cudaGetLastError();
            throw DeviceError(std::string("CUDA ") + call + ": " + cudaGetErrorString(e) +
                              " while describing device " + std::to_string(ordinal));
        }
    };
    cudaDeviceProp p{};
    check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
    int runtime = 0, driver = 0;
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");

    DeviceInfo info;
    info.kind = BackendKind::Cuda;
    info.index = ordinal;  // the caller renumbers among supported devices
    info.name = p.name;
    info.vendor = "NVIDIA";
    info.platform = "CUDA " + version_string(runtime);
    info.driver = version_string(driver);
    info.global_memory = p.totalGlobalMem;
    info.compute_units = p.multiProcessorCount;
    info.is_gpu = true;
    info.capabilities = {"sm_" + std::to_string(p.major) + std::to_string(p.minor), "fft", "gemm",
                         "profiling", "fp64"};
    return info;
}

}  // namespace etude::gpu

namespace {

using etude::gpu::DeviceInfo;

// Why CUDA cannot be used at all, in one line for the registry's notes.
std::string unusable_note(cudaError_t e) {
    switch (e) {
        case cudaErrorNoDevice:
            return "CUDA: no GPU found";
        case cudaErrorInsufficientDriver: {
            // The runtime says "insufficient driver" both for an old driver and
            // for none at all; the driver version (0 = none) tells them apart.
            int driver = 0;
            cudaDriverGetVersion(&driver);
            if (driver > 0)
                return "CUDA: the installed driver is older than the CUDA 13 runtime this was "
                       "built with (update the NVIDIA driver)";
            break;
        }
        default:
            break;
    }
    return std::string("CUDA: no NVIDIA driver (libcuda) on this machine: ") +
           cudaGetErrorString(e);
}

}  // namespace

extern "C" {

ETUDE_CUDA_EXPORT bool etude_cuda_list_devices(std::vector<DeviceInfo>* out, std::string* note) {
    try {
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess) {
            cudaGetLastError();
            if (note) *note = unusable_note(e);
            return false;
        }
        if (count == 0) {
            if (note) *note = "CUDA: no GPU found";
            return false;
        }
        std::string skipped;
        int usable = 0;
        for (int i = 0; i < count; ++i) {
            int major = 0;
            if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) !=
                cudaSuccess) {
                cudaGetLastError();
                continue;
            }
            DeviceInfo info = etude::gpu::CudaBackend::describe(i);
            // Kernels are built for sm_80 and sm_90 (+PTX): older GPUs have
            // no code to run.
            if (major < 8) {
                skipped += (skipped.empty() ? "" : ", ") + info.name + " (" +
                           info.capabilities.front() + ")";
                continue;
            }
            // Numbered among the listed devices, as etude_cuda_open_device
            // takes them (CudaBackend skips the same old GPUs).
            info.index = usable++;
            if (out) out->push_back(std::move(info));
        }
        if (note && !skipped.empty())
            *note = "CUDA: skipped GPUs older than sm_80, which this build does not support: " +
                    skipped;
        if (usable == 0 && note && skipped.empty()) *note = "CUDA: no usable GPU found";
        return usable > 0;
    } catch (const std::exception& ex) {
        if (note) *note = std::string("CUDA: ") + ex.what();
        return false;
    }
}

ETUDE_CUDA_EXPORT etude::gpu::Backend* etude_cuda_open_device(int index, std::string* error) {
    try {
        return new etude::gpu::CudaBackend(index);
    } catch (const std::exception& ex) {
        if (error) *error = ex.what();
        return nullptr;
    }
}

}  // extern "C"
