// Device detection in a short-lived child process, so that what the drivers
// load to answer it never stays in this one.
//
// Asking a driver for its devices loads it, and a driver cannot be unloaded:
// PoCL and lavapipe bring LLVM (marked NODELETE, so dlclose leaves it),
// libetude_cuda.so brings the CUDA runtime, cuBLAS and cuFFT. Measured with
// VmRSS on the development VM, that is 65-225 MB in every process that ever
// detected devices, whether or not it then used one. A forked child asks
// instead and hands back what it found (the DeviceInfo fields and the notes,
// written to a pipe); the driver of a device is then loaded here only when
// that device is opened.
//
// Threads: any. The child only calls the detection it is given, malloc and
// write() before _exit(): glibc resets its allocator's and dynamic loader's
// locks in the child of a multi-threaded process, so dlopen works there.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

struct DetectedDevices {
    std::vector<DeviceInfo> devices;
    std::vector<std::string> notes;  // what was not found, and why (one line each)
};

// Runs `detect` in a forked child and returns its answer. A child that dies
// (a driver that crashes), says nothing for `timeout_ms` (a driver that
// hangs: it is killed) or answers in a way that cannot be read gives no
// devices and a note saying so. nullopt when no child could be made (fork or
// pipe failed): then the caller detects in this process.
std::optional<DetectedDevices> detect_in_child(const std::function<DetectedDevices()>& detect,
                                               int timeout_ms = 60000);

}  // namespace etude::gpu
