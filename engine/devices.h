/// \file
/// The compute devices of this machine and where a stream's GPU work runs,
/// for front ends that show them or check a request before they speak
/// (`etude devices`, the `--backend` and `--gpu-device` options of `etude
/// say` and `etude serve`). A request names a backend and a device index
/// as StreamOptions::backend and StreamOptions::device do; the policy that
/// turns it into a device is the streams' own, so what these functions say
/// is what a stream does.
///
/// Threads: any non-real-time thread. The first call that needs the devices
/// detects them (seconds: each driver is asked in a child process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace etude::engine {

/// A backend and a device within it, as StreamOptions::backend and
/// StreamOptions::device take them.
struct DeviceRequest {
    std::string backend = "auto";  ///< "auto", "cpu", "cuda", "opencl" or "vulkan"
    int device = -1;               ///< index within that backend; -1: the best one
    /// Whether it names a device (a backend other than "auto", or an index):
    /// such a device is used whatever it is, and failing to open it is an
    /// error, where "auto" takes a GPU only.
    bool names_device() const { return backend != "auto" || device >= 0; }
};

/// `backend` and `device` as a request, checked without detecting any
/// device; throws std::invalid_argument naming the choices for an unknown
/// backend.
DeviceRequest parse_device_request(const std::string& backend, int device = -1);

/// `request` with what it leaves open ("auto", -1) filled in from the
/// environment variables ETUDE_BACKEND and ETUDE_DEVICE, as streams do.
DeviceRequest with_device_environment(DeviceRequest request);

/// The arithmetic of the devices' matrix products and convolutions.
enum class DevicePrecision {
    /// IEEE single precision, as the CPU computes: the default, and the
    /// precision every parity bound between backends is stated for.
    Fp32,
    /// TF32 tensor cores where a device has them (CUDA): each product's
    /// inputs rounded to 10 bits of mantissa, the sums kept in single
    /// precision. Faster on a data-centre GPU; opt-in, since the audio then
    /// differs from the CPU's by more than the parity bounds (its distance
    /// in dB: docs/backends.md, "TF32, opt-in"). Devices without such a mode
    /// stay in Fp32.
    Tf32,
};

/// "fp32" or "tf32" as a DevicePrecision; throws std::invalid_argument
/// naming the choices for anything else.
DevicePrecision parse_device_precision(const std::string& name);
/// "fp32" or "tf32".
const char* device_precision_name(DevicePrecision precision);

/// Sets the precision of every device this process has opened or opens
/// later (the devices are shared, so it is process-wide, as
/// Engine::Options::device_precision sets it). Devices without that mode
/// keep Fp32.
void set_device_precision(DevicePrecision precision);

/// A compute device found on this machine.
struct ComputeDevice {
    std::string backend;   ///< "cuda", "vulkan", "opencl" or "cpu"
    int index = 0;         ///< its position among its backend's devices
    std::string name;      ///< "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
    std::string platform;  ///< the OpenCL platform, "CUDA 13.0" or "Vulkan 1.3.230"
    std::string driver;    ///< the driver or runtime version
    std::uint64_t global_memory = 0;  ///< bytes
    int compute_units = 0;            ///< as the driver counts them
    bool is_gpu = false;              ///< a GPU, not the host's cores
    /// What it offers ("fft", "gemm", "fp64", ...); a Vulkan device also its
    /// type: "discrete", "integrated", "virtual" or "cpu".
    std::vector<std::string> capabilities;
};

/// Every device found, best first: CUDA GPUs, Vulkan GPUs, OpenCL GPUs,
/// then the devices that run on the host's cores, then the CPU backend.
std::vector<ComputeDevice> compute_devices();

/// What was not found and why (no OpenCL platform, no Vulkan driver, ...),
/// one line each.
std::vector<std::string> device_notes();

/// The device `request` resolves to (the environment not applied: see
/// with_device_environment()). Throws std::invalid_argument with a clear
/// message when there is no such device ("there is no OpenCL device 3").
ComputeDevice resolve_device(const DeviceRequest& request);

/// Where a text stream's GPU tier runs for a request.
struct GpuTierPlan {
    bool use = false;      ///< the GPU tier runs on `device`; false: the CPU does it all
    ComputeDevice device;  ///< what the request resolved to
    /// Why there is no GPU tier ("no GPU found", "NAME is not a GPU", "the
    /// CPU backend was requested"), or the device used.
    std::string note;
};

/// What a stream's GPU tier would be for `request` (the environment not
/// applied): the device it resolves to, used if named or if it is a GPU.
/// Opens nothing. Throws std::invalid_argument as resolve_device().
GpuTierPlan plan_gpu_tier(const DeviceRequest& request);

/// The time a device spent in one kernel (or copy) so far in this process.
struct KernelTime {
    std::string name;         ///< the operation, or "h2d"/"d2h" for copies
    std::uint64_t calls = 0;  ///< how often it ran
    double total_ms = 0;      ///< all calls together, measured on the device where it can
    double max_ms = 0;        ///< the longest call
};

/// The kernel times of the device `request` resolves to (opened if it is
/// not open yet, as the streams share it). Throws if there is no such
/// device or it cannot be opened.
std::vector<KernelTime> device_kernel_times(const DeviceRequest& request);

/// One backend's time for one operation.
struct KernelMeasurement {
    std::string backend;  ///< "cpu:0", "opencl:0", "cuda:0"
    double ms = 0;        ///< median time per call; negative if the backend cannot run it
};

/// One operation measured on every device.
struct KernelChoice {
    std::string op;          ///< "gemm", "conv1d", "rfft", "activation", "layer_norm", ...
    std::string workload;    ///< the size it was measured at
    std::size_t chosen = 0;  ///< index into `measured` of the fastest
    /// per device calibrated, in compute_devices() order
    std::vector<KernelMeasurement> measured;
};

/// A device that calibrate_kernels() could not open, and why.
struct UncalibratedDevice {
    std::string backend;  ///< as ComputeDevice::backend
    int index = 0;        ///< as ComputeDevice::index
    std::string error;    ///< why it could not be opened
};

/// The kernel benchmark table of this machine.
struct KernelCalibration {
    std::vector<UncalibratedDevice> skipped;  ///< devices left out
    std::vector<KernelChoice> table;          ///< one row per operation
};

/// Times a handful of operations (GEMM, conv1d, rfft, activations, ...)
/// `repeats` times on every device and says which is fastest: for a person
/// choosing a backend; the engine's own choice is made per block by its
/// scheduler and does not use it. Takes seconds.
KernelCalibration calibrate_kernels(int repeats = 5);

}  // namespace etude::engine
