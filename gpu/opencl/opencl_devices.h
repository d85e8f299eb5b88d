// Entry points of the OpenCL backend for the registry.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

// Every OpenCL device of every platform, in platform order (DeviceInfo::index
// numbers them 0..n-1 across platforms). Problems become lines in `notes`.
std::vector<DeviceInfo> list_opencl_devices(std::vector<std::string>& notes);

// Opens OpenCL device `index` (as numbered above): creates the context,
// compiles the kernels once, sets up clFFT. Throws gpu::DeviceError with the
// build log's first lines if a kernel fails to compile.
std::unique_ptr<Backend> open_opencl_device(int index);

}  // namespace etude::gpu
