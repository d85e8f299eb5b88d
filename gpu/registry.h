// Finding, ranking and opening compute devices, and the kernel registry.
//
// Detection runs once per process, and only when a request needs it (a
// request for the CPU backend never does): the CPU backend always; every
// OpenCL platform/device (through the ICD loader); every CUDA device
// (through the optional module libetude_cuda.so, loaded at run time so that
// a build or a machine without CUDA still runs); every Vulkan device
// (through the system's Vulkan loader, opened at run time for the same
// reason). All but the CPU are asked in a short-lived child process
// (device_probe.h), so no driver stays loaded here unless its device is
// opened. Whatever goes wrong on the way (no OpenCL platform, an ICD that
// fails to load, a CUDA driver older than the toolkit, no GPU, a driver that
// crashes) becomes a one-line note, never an exception.
//
// Ranking: CUDA GPU, then Vulkan GPU, then OpenCL GPU, then the devices that
// run on the host's cores (Vulkan's lavapipe, then OpenCL's PoCL), then the
// plain CPU. A request picks a kind (auto|cpu|cuda|opencl|vulkan) and optionally a
// device index within that kind; the environment variables ETUDE_BACKEND and
// ETUDE_DEVICE apply when the request leaves them open.
//
// Threads: all functions may be called from any thread (internally locked).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

struct BackendRequest {
    std::string kind = "auto";  // "auto", "cpu", "cuda", "opencl", "vulkan"
    int device = -1;            // index within that kind; -1 = the best one
};

// Parses "auto|cpu|cuda|opencl|vulkan"; throws std::invalid_argument naming the choices.
BackendRequest parse_backend_request(const std::string& kind, int device = -1);
// Fills the fields the request leaves open from ETUDE_BACKEND / ETUDE_DEVICE.
BackendRequest with_environment(BackendRequest r);

// Where the CUDA module (libetude_cuda.so) is looked for, first to last.
// A module named by ETUDE_CUDA_MODULE (`named`, null or empty when unset)
// is the only candidate: a name that is wrong is said in the notes, not
// passed over for another module. Otherwise: the file beside the program or
// library that holds this code (`beside_folder`, cuda_module_folder(); for
// the Python package its own folder, so a module copied there is found),
// then the build tree's and the install prefix's.
std::vector<std::string> cuda_module_candidates(const char* named,
                                                const std::string& beside_folder);
// The folder of the program or shared library (the Python extension) this
// code is linked into, found with dladdr; "" when it cannot be told.
std::string cuda_module_folder();

// The process's CPU backend. Cheap: it does not run device detection (which
// costs start-up time: a child process that loads the OpenCL ICDs, the
// Vulkan drivers and the CUDA module), so CPU-only work never pays for it.
std::shared_ptr<Backend> shared_cpu_backend();

class DeviceRegistry {
  public:
    // Detection runs on the first call to devices(), notes(), or resolve() or
    // open() of anything but the CPU.
    static DeviceRegistry& instance();

    // Every device found, best first (the ranking above).
    const std::vector<DeviceInfo>& devices() const;
    // What was not found, and why (one line each).
    const std::vector<std::string>& notes() const;

    // The device a request resolves to; throws std::invalid_argument with a
    // clear message (e.g. "--device 3: there is no OpenCL device 3; found 1").
    DeviceInfo resolve(const BackendRequest& request) const;
    // Opens (once; then shared) the backend for a request. Throws
    // gpu::DeviceError if the device cannot be initialised (e.g. a kernel
    // fails to compile); the caller falls back to the CPU.
    std::shared_ptr<Backend> open(const BackendRequest& request);
    std::shared_ptr<Backend> cpu();

    // Times every operation of every backend, the CPU's included, opened
    // now or later (Backend::set_profiling): for a kernel table or a
    // trace's kernel rows. Off unless called.
    void set_profiling(bool on);

    // The precision of the matrix products and convolutions of every device
    // opened now or later (Backend::set_math_precision); a device without
    // that mode (all but CUDA for Tf32) stays in Fp32. Fp32 unless called.
    void set_math_precision(MathPrecision precision);

    // Internal: the devices opened so far (registry.cpp, which also holds
    // the table of backend modules).
    struct Impl;

  private:
    DeviceRegistry();
    void detect() const;
    void detect_now() const;
    mutable std::once_flag detected_;
    mutable std::vector<DeviceInfo> devices_;
    mutable std::vector<std::string> notes_;
    std::shared_ptr<Impl> impl_;
};

}  // namespace etude::gpu
