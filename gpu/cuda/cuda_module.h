// The CUDA backend is built as a separate module, libetude_cuda.so, which the
// registry loads with dlopen at run time: a machine without the CUDA runtime
// libraries, or without a GPU, still runs everything else. These are the
// module's two entry points (C linkage so dlsym finds them by name; the
// types are our own C++ types, built by the same compiler).
#pragma once

#include <string>
#include <vector>

#include "gpu/backend.h"

extern "C" {

// Appends a DeviceInfo for every usable CUDA device. Returns false and sets
// `note` to a one-line reason when CUDA cannot be used at all (no driver, a
// driver older than the toolkit, no device).
bool etude_cuda_list_devices(std::vector<etude::gpu::DeviceInfo>* out, std::string* note);

// Opens CUDA device `index` (0-based among the listed ones). Returns nullptr
// and sets `error` on failure. The caller owns the result.
etude::gpu::Backend* etude_cuda_open_device(int index, std::string* error);
}
