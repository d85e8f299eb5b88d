// Where a stream's GPU tier runs: one policy for every kind of stream (the
// spectral vocoder's block processors and the neural vocoders' model tier),
// so that "auto" means the same thing everywhere.
//
// A request names a backend ("auto", "cpu", "cuda" or "opencl") and
// optionally a device index; ETUDE_BACKEND and ETUDE_DEVICE fill in what the
// request leaves open (gpu::with_environment). Then:
//  - A device named explicitly (a backend other than "auto", or a device
//    index, from the argument or the environment) is always used, whatever
//    it is: the user chose it, e.g. to run the OpenCL path on PoCL.
//  - "auto" uses the best device only if it is a GPU. An OpenCL CPU device
//    such as PoCL runs on the same cores as the CPU tier, so it adds no
//    capacity: a block that is late on it is late because those cores are
//    busy, and the CPU tier that must cover it then waits for the same
//    cores; its warm-up (program build, FFT plans) takes them too. On the
//    2-core machine of docs/benchmarks.md it is slower than the CPU backend
//    for every kernel.
//  - A request that resolves to the CPU backend has no GPU tier.
//
// Threads: any (the registry locks internally). Not for the audio callback:
// the first call runs device detection.
#pragma once

#include <memory>
#include <string>

#include "gpu/backend.h"
#include "gpu/registry.h"

namespace etude::engine {

struct GpuTierChoice {
    bool use = false;  // the GPU tier runs on `device`
    // Named explicitly (see above): such a device goes first without being
    // timed against the CPU, and failing to open it is an error to report.
    bool named = false;
    gpu::DeviceInfo device;  // what the request resolved to
    // Why there is no GPU tier ("no GPU found", "NAME is not a GPU", "the
    // CPU backend was requested"), or the device used ("opencl NAME").
    std::string note;
};

// The policy alone: `request` with the environment applied, `resolved` the
// device the registry resolved it to. Detects nothing, opens nothing.
GpuTierChoice choose_gpu_tier(const gpu::BackendRequest& request, const gpu::DeviceInfo& resolved);

struct GpuTier {
    std::shared_ptr<gpu::Backend> backend;  // null: no GPU tier, the CPU does it all
    GpuTierChoice choice;
};

// Resolves `kind` and `device` (-1: the best) with the environment and the
// device registry, applies the policy and opens the chosen device. Throws
// std::invalid_argument for a request that names no device here (unknown
// backend, no such device) and gpu::DeviceError if the chosen device cannot
// be opened, or if devices were opened before this process forked (its
// drivers' threads are not in a forked child). Every stream's "open a GPU"
// goes through this.
GpuTier open_gpu_tier(const std::string& kind, int device);

// Devices opened before a fork cannot be used in the child: it has their
// memory but not their drivers' threads (PoCL's, CUDA's), and would wait
// for them for ever. Called before every device is opened (open_gpu_tier()
// and engine/devices.cpp's): throws gpu::DeviceError in a child whose
// parent opened one, so that its streams' CPU covers the work; a child
// whose parent opened none may open its own. The CPU backend needs no
// claim.
void claim_devices_for_this_process(const gpu::DeviceInfo& device);

// Whether a device was claimed in this process, or in one it was forked
// from (whose devices it is refused).
bool devices_were_opened();

// For the neural vocoders: the GPU tier's backend, or the process's CPU
// backend when there is no GPU tier. `note` says where the model runs and
// why ("opencl NAME", "CPU (NAME is not a GPU)"). Throws as open_gpu_tier.
std::shared_ptr<gpu::Backend> open_model_backend(const std::string& kind, int device,
                                                 std::string* note = nullptr);

}  // namespace etude::engine
