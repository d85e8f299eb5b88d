// The OpenCL backend's private state, shared by its three source files
// (opencl_backend.cpp, opencl_ops.cpp, opencl_fft.cpp) and nothing else: the
// RAII handles of OpenCL objects, the kernels of the program, the per-queue
// state (ClQueue), clFFT plans, the backend's State and the kernel launch
// helper.
#pragma once

#include <CL/cl.h>
#include <clFFT.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/kernel_timing_table.h"
#include "gpu/opencl/opencl_backend.h"

namespace etude::gpu {

// Owns one OpenCL object; Release is its clRelease* function.
template <class T, cl_int(CL_API_CALL* Release)(T)>
class ClHandle {
  public:
    ClHandle() = default;
    explicit ClHandle(T h) : h_(h) {}
    ClHandle(ClHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    ClHandle& operator=(ClHandle&& o) noexcept {
        if (this != &o) reset(std::exchange(o.h_, nullptr));
        return *this;
    }
    ClHandle(const ClHandle&) = delete;
    ClHandle& operator=(const ClHandle&) = delete;
    ~ClHandle() { reset(); }

    void reset(T h = nullptr) {
        if (h_) Release(h_);
        h_ = h;
    }
    T get() const { return h_; }
    explicit operator bool() const { return h_ != nullptr; }

  private:
    T h_ = nullptr;
};

using Context = ClHandle<cl_context, clReleaseContext>;
using CommandQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using Program = ClHandle<cl_program, clReleaseProgram>;
using Kernel = ClHandle<cl_kernel, clReleaseKernel>;
using Mem = ClHandle<cl_mem, clReleaseMemObject>;
using Event = ClHandle<cl_event, clReleaseEvent>;

// The kernels of the program (kernels/*.cl); indices into ClQueue::kernels.
enum KernelId : int {
    kFill,
    kActivation,
    kGemm,
    kConv1d,
    kConvTranspose1d,
    kLayerNorm,
    kAxpby,
    kTranspose,
    kAddBias,
    kPolarSpectrum,
    kHermitianEdges,
    kFrameSignal,
    kOverlapAdd,
    kComplexMultiply,
    kComplexExp,
    kMinimumPhaseFold,
    kGatedTanh,
    kSoftmaxRows,
    kRelativeAttentionScores,
    kRelativeAttentionValues,
    kBroadcastMultiply,
    kSplineInverse,
    kCopySlotRows,
    kKernelCount
};
inline constexpr std::array<const char*, kKernelCount> kKernelNames = {"fill",
                                                                       "activation",
                                                                       "gemm",
                                                                       "conv1d",
                                                                       "conv_transpose1d",
                                                                       "layer_norm",
                                                                       "axpby",
                                                                       "transpose",
                                                                       "add_bias",
                                                                       "polar_spectrum",
                                                                       "hermitian_edges",
                                                                       "frame_signal",
                                                                       "overlap_add",
                                                                       "complex_multiply",
                                                                       "complex_exp",
                                                                       "minimum_phase_fold",
                                                                       "gated_tanh",
                                                                       "softmax_rows",
                                                                       "relative_attention_scores",
                                                                       "relative_attention_values",
                                                                       "broadcast_multiply",
                                                                       "spline_inverse",
                                                                       "copy_slot_rows"};

// A DeviceBuffer's handle on this backend.
inline cl_mem mem(const DeviceBuffer& b) {
    return static_cast<cl_mem>(b.handle());
}

// clFFT's process-wide setup, done once on first use (opencl_fft.cpp).
clfftStatus clfft_setup_once();

// One in-order queue with its own kernel objects (kernel arguments are
// per-object state, so sharing them across threads would race) and the
// profiling events of the work enqueued on it.
class OpenClBackend::ClQueue final : public Queue {
  public:
    struct Pending {
        const char* name;  // a string literal or to_string(): lives forever
        Event start;       // optional: a marker before a multi-kernel op
        Event end;
    };

    ~ClQueue() override {
        // Non-blocking copies may still read or write the caller's host
        // memory: let them land before the queue disappears.
        if (queue) clFinish(queue.get());
    }

    CommandQueue queue;
    std::array<Kernel, kKernelCount> kernels;
    std::vector<Pending> pending;
    // clFFT's temporary buffer, and a copy of irfft's input (see irfft()),
    // per queue so that queues running at the same time never share them.
    Mem fft_tmp;
    std::size_t fft_tmp_bytes = 0;
    Mem fft_scratch;
    std::size_t fft_scratch_bytes = 0;
};

struct OpenClBackend::FftPlan {
    clfftPlanHandle handle = 0;
    std::size_t tmp_bytes = 0;
    bool baked = false;
    // Guards baking and enqueueing: clFFT does not document a plan as safe
    // to use from several threads at once.
    std::mutex mu;
    ~FftPlan();  // opencl_fft.cpp: not through clFFT once it is torn down
};

// Members are destroyed bottom-up: plans and buffers go before the program,
// the queue and finally the context they belong to.
struct OpenClBackend::State {
    DeviceInfo info;
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    std::size_t max_alloc = 0;
    Context context;
    // For work that belongs to no user queue: baking FFT plans in
    // prewarm_fft(), mapping and unmapping pinned buffers.
    std::mutex internal_mu;
    CommandQueue internal;
    Program program;

    KernelTimingTable timings;

    std::mutex pinned_mu;
    std::unordered_map<float*, Mem> pinned;  // mapped pointer -> its buffer

    std::mutex fft_mu;
    std::map<std::tuple<int, int, bool>, std::unique_ptr<FftPlan>> plans;
};

template <class T>
cl_int set_arg(cl_kernel k, cl_uint index, const T& value) {
    return clSetKernelArg(k, index, sizeof(T), &value);
}

struct ClResult {
    cl_int err = CL_SUCCESS;
    const char* function = "";
};

// Sets the kernel's arguments, in order, and enqueues it: the core of
// OpenClBackend::launch(), also used directly by irfft's edge pass.
template <class... Args>
ClResult enqueue_kernel(cl_command_queue q, cl_kernel k, cl_uint dims, const std::size_t* global,
                        const std::size_t* local, cl_event* event, const Args&... args) {
    cl_uint index = 0;
    cl_int err = CL_SUCCESS;
    // Stops at the first failing argument; `index` then names it in a debugger.
    ((err = err == CL_SUCCESS ? set_arg(k, index++, args) : err), ...);
    if (err != CL_SUCCESS) return {err, "clSetKernelArg"};
    err = clEnqueueNDRangeKernel(q, k, dims, nullptr, global, local, 0, nullptr, event);
    if (err != CL_SUCCESS) return {err, "clEnqueueNDRangeKernel"};
    return {};
}

// The global and local sizes of one launch.
struct OpenClBackend::Range {
    cl_uint dims = 1;
    std::size_t global[2] = {0, 0};
    std::size_t local[2] = {0, 0};
};

}  // namespace etude::gpu
