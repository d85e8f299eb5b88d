// Built instead of the rest of gpu/opencl/ when the project is configured with
// -DETUDE_WITH_OPENCL=OFF: the registry then reports OpenCL as absent.
#include "gpu/opencl/opencl_devices.h"

namespace etude::gpu {

std::vector<DeviceInfo> list_opencl_devices(std::vector<std::string>& notes) {
    notes.push_back(
        "OpenCL: this build has no OpenCL backend (configured with ETUDE_WITH_OPENCL=OFF)");
    return {};
}

std::unique_ptr<Backend> open_opencl_device(int) {
    throw DeviceError("this build has no OpenCL backend (ETUDE_WITH_OPENCL=OFF)");
}

}  // namespace etude::gpu
