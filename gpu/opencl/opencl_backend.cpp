#include "gpu/opencl/opencl_backend.h"

#include <CL/cl.h>
#include <clFFT.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "gpu/kernels/kernel_bodies.h"

namespace etude::gpu {

const char* opencl_error_name(int err) {
    switch (err) {
        case CL_SUCCESS:
            return "CL_SUCCESS";
        case CL_DEVICE_NOT_FOUND:
            return "CL_DEVICE_NOT_FOUND";
        case CL_DEVICE_NOT_AVAILABLE:
            return "CL_DEVICE_NOT_AVAILABLE";
        case CL_COMPILER_NOT_AVAILABLE:
            return "CL_COMPILER_NOT_AVAILABLE";
        case CL_MEM_OBJECT_ALLOCATION_FAILURE:
            return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
        case CL_OUT_OF_RESOURCES:
            return "CL_OUT_OF_RESOURCES";
        case CL_OUT_OF_HOST_MEMORY:
            return "CL_OUT_OF_HOST_MEMORY";
        case CL_PROFILING_INFO_NOT_AVAILABLE:
            return "CL_PROFILING_INFO_NOT_AVAILABLE";
        case CL_BUILD_PROGRAM_FAILURE:
            return "CL_BUILD_PROGRAM_FAILURE";
        case CL_MAP_FAILURE:
            return "CL_MAP_FAILURE";
        case CL_MISALIGNED_SUB_BUFFER_OFFSET:
            return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
        case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
            return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
        case CL_INVALID_VALUE:
            return "CL_INVALID_VALUE";
        case CL_INVALID_DEVICE_TYPE:
            return "CL_INVALID_DEVICE_TYPE";
        case CL_INVALID_PLATFORM:
            return "CL_INVALID_PLATFORM";
        case CL_INVALID_DEVICE:
            return "CL_INVALID_DEVICE";
        case CL_INVALID_CONTEXT:
            return "CL_INVALID_CONTEXT";
        case CL_INVALID_QUEUE_PROPERTIES:
            return "CL_INVALID_QUEUE_PROPERTIES";
        case CL_INVALID_COMMAND_QUEUE:
            return "CL_INVALID_COMMAND_QUEUE";
        case CL_INVALID_HOST_PTR:
            return "CL_INVALID_HOST_PTR";
        case CL_INVALID_MEM_OBJECT:
            return "CL_INVALID_MEM_OBJECT";
        case CL_INVALID_BUILD_OPTIONS:
            return "CL_INVALID_BUILD_OPTIONS";
        case CL_INVALID_PROGRAM:
            return "CL_INVALID_PROGRAM";
        case CL_INVALID_PROGRAM_EXECUTABLE:
            return "CL_INVALID_PROGRAM_EXECUTABLE";
        case CL_INVALID_KERNEL_NAME:
            return "CL_INVALID_KERNEL_NAME";
        case CL_INVALID_KERNEL:
            return "CL_INVALID_KERNEL";
        case CL_INVALID_ARG_INDEX:
            return "CL_INVALID_ARG_INDEX";
        case CL_INVALID_ARG_VALUE:
            return "CL_INVALID_ARG_VALUE";
        case CL_INVALID_ARG_SIZE:
            return "CL_INVALID_ARG_SIZE";
        case CL_INVALID_KERNEL_ARGS:
            return "CL_INVALID_KERNEL_ARGS";
        case CL_INVALID_WORK_DIMENSION:
            return "CL_INVALID_WORK_DIMENSION";
        case CL_INVALID_WORK_GROUP_SIZE:
            return "CL_INVALID_WORK_GROUP_SIZE";
        case CL_INVALID_WORK_ITEM_SIZE:
            return "CL_INVALID_WORK_ITEM_SIZE";
        case CL_INVALID_GLOBAL_OFFSET:
            return "CL_INVALID_GLOBAL_OFFSET";
        case CL_INVALID_EVENT_WAIT_LIST:
            return "CL_INVALID_EVENT_WAIT_LIST";
        case CL_INVALID_EVENT:
            return "CL_INVALID_EVENT";
        case CL_INVALID_OPERATION:
            return "CL_INVALID_OPERATION";
        case CL_INVALID_BUFFER_SIZE:
            return "CL_INVALID_BUFFER_SIZE";
        case CL_INVALID_GLOBAL_WORK_SIZE:
            return "CL_INVALID_GLOBAL_WORK_SIZE";
        case CL_INVALID_PROPERTY:
            return "CL_INVALID_PROPERTY";
        case -1001:
            return "CL_PLATFORM_NOT_FOUND_KHR";
        // clFFT's own status codes, above OpenCL's range.
        case CLFFT_BUGCHECK:
            return "CLFFT_BUGCHECK";
        case CLFFT_NOTIMPLEMENTED:
            return "CLFFT_NOTIMPLEMENTED";
        case CLFFT_TRANSPOSED_NOTIMPLEMENTED:
            return "CLFFT_TRANSPOSED_NOTIMPLEMENTED";
        case CLFFT_FILE_NOT_FOUND:
            return "CLFFT_FILE_NOT_FOUND";
        case CLFFT_FILE_CREATE_FAILURE:
            return "CLFFT_FILE_CREATE_FAILURE";
        case CLFFT_VERSION_MISMATCH:
            return "CLFFT_VERSION_MISMATCH";
        case CLFFT_INVALID_PLAN:
            return "CLFFT_INVALID_PLAN";
        case CLFFT_DEVICE_NO_DOUBLE:
            return "CLFFT_DEVICE_NO_DOUBLE";
        case CLFFT_DEVICE_MISMATCH:
            return "CLFFT_DEVICE_MISMATCH";
        default:
            return "unknown OpenCL error";
    }
}

namespace {

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
    kKernelCount
};
constexpr std::array<const char*, kKernelCount> kKernelNames = {"fill",
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
                                                                "gated_tanh"};

// Must match TS, LN_WG and TT in kernels/tiled_kernels.cl.
constexpr std::size_t kGemmTile = 16;
constexpr std::size_t kLayerNormGroup = 64;
constexpr std::size_t kTransposeTile = 16;
// Work-group size of the 1-D element-wise kernels.
constexpr std::size_t kGroup1d = 64;
// Profiling events kept per queue before finished ones are read back even
// without a synchronize(), so a queue that is never synchronised stays bounded.
constexpr std::size_t kMaxPendingEvents = 1024;

cl_mem mem(const DeviceBuffer& b) {
    return static_cast<cl_mem>(b.handle());
}

std::size_t round_up(std::size_t n, std::size_t m) {
    return (n + m - 1) / m * m;
}

int activation_code(Activation a) {
    switch (a) {
        case Activation::LeakyRelu:
            return ETUDE_ACT_LEAKY_RELU;
        case Activation::Gelu:
            return ETUDE_ACT_GELU;
        case Activation::Tanh:
            return ETUDE_ACT_TANH;
        case Activation::Exp:
            return ETUDE_ACT_EXP;
        case Activation::Sin:
            return ETUDE_ACT_SIN;
        case Activation::Cos:
            return ETUDE_ACT_COS;
    }
    return -1;
}

// True once clFFT has been torn down at exit: plans still alive then (a
// backend in a static that outlived it) must not be destroyed through it.
std::atomic<bool> g_clfft_torn_down{false};

// clFFT keeps process-wide state: set it up once per process, on first use,
// and tear it down at exit (it complains on stderr otherwise). The atexit
// handler is registered after clfftSetup returns, so it runs before clFFT's
// own static objects are destroyed.
clfftStatus clfft_setup_once() {
    static const clfftStatus status = [] {
        clfftSetupData data;
        clfftInitSetupData(&data);
        const clfftStatus st = clfftSetup(&data);
        if (st == CLFFT_SUCCESS)
            std::atexit([] {
                g_clfft_torn_down = true;
                clfftTeardown();
            });
        return st;
    }();
    return status;
}

std::string first_lines(const std::string& text, int lines) {
    std::istringstream in(text);
    std::string line, out;
    for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
    return out;
}

}  // namespace

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
    ~FftPlan() {
        if (handle && !g_clfft_torn_down) clfftDestroyPlan(&handle);
    }
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

    mutable std::mutex timing_mu;
    std::map<std::string, KernelTiming> timings;

    std::mutex pinned_mu;
    std::unordered_map<float*, Mem> pinned;  // mapped pointer -> its buffer

    std::mutex fft_mu;
    std::map<std::tuple<int, int, bool>, std::unique_ptr<FftPlan>> plans;
};

namespace {

template <class T>
cl_int set_arg(cl_kernel k, cl_uint index, const T& value) {
    return clSetKernelArg(k, index, sizeof(T), &value);
}

struct ClResult {
    cl_int err = CL_SUCCESS;
    const char* function = "";
};

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

}  // namespace

OpenClBackend::OpenClBackend(void* platform, void* device, DeviceInfo info)
    : s_(std::make_unique<State>()) {
    s_->info = std::move(info);
    s_->platform = static_cast<cl_platform_id>(platform);
    s_->device = static_cast<cl_device_id>(device);
    const char* op = "opening the device";

    cl_ulong max_alloc = 0;
    check(clGetDeviceInfo(s_->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc,
                          nullptr),
          "clGetDeviceInfo", op);
    s_->max_alloc = static_cast<std::size_t>(max_alloc);

    const cl_context_properties props[] = {
        CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(s_->platform), 0};
    cl_int err = CL_SUCCESS;
    s_->context.reset(clCreateContext(props, 1, &s_->device, nullptr, nullptr, &err));
    check(err, "clCreateContext", op);
    s_->internal.reset(
        clCreateCommandQueue(s_->context.get(), s_->device, CL_QUEUE_PROFILING_ENABLE, &err));
    check(err, "clCreateCommandQueue", op);

    const char* source = opencl_kernel_source();
    s_->program.reset(clCreateProgramWithSource(s_->context.get(), 1, &source, nullptr, &err));
    check(err, "clCreateProgramWithSource", op);
    err = clBuildProgram(s_->program.get(), 1, &s_->device, "", nullptr, nullptr);
    if (err != CL_SUCCESS) {
        std::size_t log_size = 0;
        clGetProgramBuildInfo(s_->program.get(), s_->device, CL_PROGRAM_BUILD_LOG, 0, nullptr,
                              &log_size);
        std::string log(log_size, '\0');
        if (log_size > 0)
            clGetProgramBuildInfo(s_->program.get(), s_->device, CL_PROGRAM_BUILD_LOG, log_size,
                                  log.data(), nullptr);
        const std::string what = std::string("OpenCL clBuildProgram: ") + opencl_error_name(err) +
                                 " while compiling the kernels for " + s_->info.name +
                                 "; build log:\n" + first_lines(log, 20);
        mark_failed(what);
        throw DeviceError(what);
    }
    check(clfft_setup_once(), "clfftSetup", op);
    warm_up_kernels();
}

// Runs every kernel once on tiny inputs. Some runtimes finish compiling a
// kernel only at its first launch (PoCL generates the work-group function
// for each local size then: ~0.2 s per kernel on a CPU), which would
// otherwise land on the first real call. Local sizes are fixed per kernel,
// so one launch each covers every later call.
void OpenClBackend::warm_up_kernels() {
    auto q = create_queue();
    constexpr std::size_t kN = 256;
    DeviceBuffer in = allocate(kN, "warm-up");
    DeviceBuffer out = allocate(kN, "warm-up");
    fill(*q, in, 0.0f, kN);
    fill(*q, out, 0.0f, kN);
    activation(*q, Activation::Gelu, in, out, kN, 0.0f);
    gemm(*q, false, false, 8, 8, 8, 1.0f, in, 8, in, 8, 0.0f, out, 8);
    Conv1dShape s;  // 1 channel, kernel 1, length 16
    s.in_length = 16;
    conv1d(*q, s, in, in, DeviceBuffer{}, out);
    conv_transpose1d(*q, s, in, in, DeviceBuffer{}, out);
    layer_norm(*q, 2, 16, 1e-5f, in, in, in, out);
    axpby(*q, kN, 1.0f, in, 0.0f, out);
    transpose(*q, 8, 16, in, out);
    add_bias(*q, 8, 16, in, true, out);
    polar_spectrum(*q, 4, 16, 100.0f, in, out);
    frame_signal(*q, in, 16, 8, 4, in, out);
    overlap_add(*q, in, 16, 8, 4, in, out);
    complex_multiply(*q, in, in, out, kN / 2);
    complex_exp(*q, in, out, kN / 2);
    minimum_phase_fold(*q, 16, 2, in, out);
    synchronize(*q);
    reset_timings();
}

// Work still queued internally (an unmap) finishes before State's members
// are released in reverse order: plans, pinned buffers, program, context.
OpenClBackend::~OpenClBackend() {
    if (s_ && s_->internal) clFinish(s_->internal.get());
}

const DeviceInfo& OpenClBackend::info() const {
    return s_->info;
}

void OpenClBackend::begin(const char* op) {
    const double late_ms = consume_fault(op);
    if (late_ms > 0)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
}

void OpenClBackend::fail(int err, const char* function, const char* op) {
    const std::string what =
        std::string("OpenCL ") + function + ": " + opencl_error_name(err) + " while " + op;
    // The device could not back a buffer: recoverable (trim a pool, fall back
    // to the CPU), so the backend stays healthy.
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE) throw OutOfMemory(what);
    mark_failed(what);
    throw DeviceError(what);
}

OpenClBackend::ClQueue& OpenClBackend::queue_of(Queue& q, const char* op) {
    auto* cq = dynamic_cast<ClQueue*>(&q);
    if (!cq)
        throw DeviceError(std::string("OpenCL backend: a queue of another backend while ") + op);
    return *cq;
}

// ---- memory ----

void* OpenClBackend::raw_allocate(std::size_t bytes) {
    begin("allocate");
    bytes = std::max<std::size_t>(bytes, sizeof(float));  // zero-sized buffers are invalid
    const std::string what = "allocating " + std::to_string(bytes) + " bytes on " + s_->info.name;
    if (bytes > s_->max_alloc)
        throw OutOfMemory("OpenCL clCreateBuffer: larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE (" +
                          std::to_string(s_->max_alloc) + ") while " + what);
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(s_->context.get(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        throw OutOfMemory(std::string("OpenCL clCreateBuffer: ") + opencl_error_name(err) +
                          " while " + what);
    check(err, "clCreateBuffer", what.c_str());
    return m;
}

void OpenClBackend::raw_free(void* handle) noexcept {
    // The runtime defers the actual release until commands using it finish.
    if (handle) clReleaseMemObject(static_cast<cl_mem>(handle));
}

float* OpenClBackend::allocate_pinned(std::size_t floats) {
    begin("allocate");
    const std::size_t bytes = std::max<std::size_t>(floats, 1) * sizeof(float);
    const std::string what = "allocating " + std::to_string(bytes) + " pinned bytes";
    cl_int err = CL_SUCCESS;
    Mem m(clCreateBuffer(s_->context.get(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes,
                         nullptr, &err));
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        throw OutOfMemory(std::string("OpenCL clCreateBuffer: ") + opencl_error_name(err) +
                          " while " + what);
    check(err, "clCreateBuffer", what.c_str());
    void* p = nullptr;
    {
        std::lock_guard lock(s_->internal_mu);
        p = clEnqueueMapBuffer(s_->internal.get(), m.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                               bytes, 0, nullptr, nullptr, &err);
    }
    check(err, "clEnqueueMapBuffer", what.c_str());
    auto* data = static_cast<float*>(p);
    std::lock_guard lock(s_->pinned_mu);
    s_->pinned.emplace(data, std::move(m));
    return data;
}

void OpenClBackend::free_pinned(float* p) noexcept {
    if (!p) return;
    Mem m;
    {
        std::lock_guard lock(s_->pinned_mu);
        auto it = s_->pinned.find(p);
        if (it == s_->pinned.end()) return;
        m = std::move(it->second);
        s_->pinned.erase(it);
    }
    std::lock_guard lock(s_->internal_mu);
    if (clEnqueueUnmapMemObject(s_->internal.get(), m.get(), p, 0, nullptr, nullptr) == CL_SUCCESS)
        clFinish(s_->internal.get());
}

// ---- queues, copies, synchronisation ----

std::unique_ptr<Queue> OpenClBackend::create_queue() {
    const char* op = "creating a queue";
    auto q = std::make_unique<ClQueue>();
    cl_int err = CL_SUCCESS;
    q->queue.reset(
        clCreateCommandQueue(s_->context.get(), s_->device, CL_QUEUE_PROFILING_ENABLE, &err));
    check(err, "clCreateCommandQueue", op);
    for (int i = 0; i < kKernelCount; ++i) {
        q->kernels[i].reset(clCreateKernel(s_->program.get(), kKernelNames[i], &err));
        check(err, "clCreateKernel", op);
    }
    return q;
}

void OpenClBackend::copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset,
                                        const float* src, std::size_t floats) {
    const char* op = "h2d";
    begin(op);
    if (floats == 0) return;
    auto& cq = queue_of(q, op);
    cl_event ev = nullptr;
    check(clEnqueueWriteBuffer(cq.queue.get(), mem(dst), CL_FALSE, dst_offset * sizeof(float),
                               floats * sizeof(float), src, 0, nullptr, &ev),
          "clEnqueueWriteBuffer", "copying to the device");
    cq.pending.push_back({op, Event(), Event(ev)});
    collect_timings(cq, false);
}

void OpenClBackend::copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src,
                                      std::size_t src_offset, std::size_t floats) {
    const char* op = "d2h";
    begin(op);
    if (floats == 0) return;
    auto& cq = queue_of(q, op);
    cl_event ev = nullptr;
    check(clEnqueueReadBuffer(cq.queue.get(), mem(src), CL_FALSE, src_offset * sizeof(float),
                              floats * sizeof(float), dst, 0, nullptr, &ev),
          "clEnqueueReadBuffer", "copying to the host");
    cq.pending.push_back({op, Event(), Event(ev)});
    collect_timings(cq, false);
}

void OpenClBackend::synchronize(Queue& q) {
    auto& cq = queue_of(q, "synchronize");
    check(clFinish(cq.queue.get()), "clFinish", "synchronizing a queue");
    collect_timings(cq, true);
}

// Reads the profiling times of finished events into the per-op totals: all
// of them after a clFinish, else (when too many have piled up) the finished
// ones at the front of the in-order queue.
void OpenClBackend::collect_timings(ClQueue& q, bool all) {
    if (!all && q.pending.size() < kMaxPendingEvents) return;
    std::size_t done = 0;
    std::vector<std::pair<const char*, double>> measured;
    for (; done < q.pending.size(); ++done) {
        auto& p = q.pending[done];
        if (!all) {
            cl_int status = CL_QUEUED;
            if (clGetEventInfo(p.end.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                               &status, nullptr) != CL_SUCCESS ||
                status != CL_COMPLETE)
                break;
        }
        cl_ulong start = 0, end = 0;
        const cl_event first = p.start ? p.start.get() : p.end.get();
        // A device that cannot time an event only loses that sample.
        if (clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof start, &start,
                                    nullptr) == CL_SUCCESS &&
            clGetEventProfilingInfo(p.end.get(), CL_PROFILING_COMMAND_END, sizeof end, &end,
                                    nullptr) == CL_SUCCESS &&
            end >= start)
            measured.emplace_back(p.name, static_cast<double>(end - start) * 1e-6);
    }
    q.pending.erase(q.pending.begin(), q.pending.begin() + static_cast<std::ptrdiff_t>(done));
    std::lock_guard lock(s_->timing_mu);
    for (const auto& [name, ms] : measured) {
        auto& t = s_->timings[name];
        t.name = name;
        ++t.calls;
        t.total_ms += ms;
        t.max_ms = std::max(t.max_ms, ms);
    }
}

std::vector<KernelTiming> OpenClBackend::kernel_timings() const {
    std::lock_guard lock(s_->timing_mu);
    std::vector<KernelTiming> out;
    out.reserve(s_->timings.size());
    for (const auto& [name, t] : s_->timings) out.push_back(t);
    return out;
}

void OpenClBackend::reset_timings() {
    std::lock_guard lock(s_->timing_mu);
    s_->timings.clear();
}

// ---- kernels ----

// The global and local sizes of one launch.
struct OpenClBackend::Range {
    cl_uint dims = 1;
    std::size_t global[2] = {0, 0};
    std::size_t local[2] = {0, 0};
};

// Element-wise kernels: one work-item per element, rounded up to whole groups.
OpenClBackend::Range OpenClBackend::range1d(std::size_t n) {
    Range r;
    r.global[0] = round_up(n, kGroup1d);
    r.local[0] = kGroup1d;
    return r;
}

// Enqueues kernel `kernel` of `cq` with `args` as its arguments, in order, and
// records its event for the op's timing.
template <class... Args>
void OpenClBackend::launch(ClQueue& cq, const char* op, int kernel, const Range& r,
                           const Args&... args) {
    cl_event ev = nullptr;
    const ClResult res = enqueue_kernel(cq.queue.get(), cq.kernels[kernel].get(), r.dims, r.global,
                                        r.local, &ev, args...);
    check(res.err, res.function, op);
    cq.pending.push_back({op, Event(), Event(ev)});
    collect_timings(cq, false);
}

void OpenClBackend::fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) {
    const char* op = "fill";
    begin(op);
    if (floats == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong n = floats;
    launch(cq, op, kFill, range1d(floats), mem(dst), n, value);
}

void OpenClBackend::activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                    std::size_t n, float alpha) {
    const char* op = to_string(f);
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    const cl_int code = activation_code(f);
    launch(cq, op, kActivation, range1d(n), mem(x), mem(y), count, code, alpha);
}

void OpenClBackend::gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k,
                              float alpha, const DeviceBuffer& a, int lda, const DeviceBuffer& b,
                              int ldb, float beta, DeviceBuffer& c, int ldc) {
    const char* op = "gemm";
    begin(op);
    if (m <= 0 || n <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;
    r.dims = 2;
    r.global[0] = round_up(static_cast<std::size_t>(n), kGemmTile);  // columns
    r.global[1] = round_up(static_cast<std::size_t>(m), kGemmTile);  // rows
    r.local[0] = r.local[1] = kGemmTile;
    const cl_int ta = trans_a, tb = trans_b, mm = m, nn = n, kk = std::max(k, 0);
    const cl_int la = lda, lb = ldb, lc = ldc;
    launch(cq, op, kGemm, r, ta, tb, mm, nn, kk, alpha, mem(a), la, mem(b), lb, beta, mem(c), lc);
}

void OpenClBackend::conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) {
    const char* op = "conv1d";
    begin(op);
    const cl_int out_len = s.conv_out_length();
    const std::size_t total = static_cast<std::size_t>(std::max(s.batch, 0)) *
                              static_cast<std::size_t>(std::max(s.out_channels, 0)) *
                              static_cast<std::size_t>(std::max(out_len, 0));
    if (total == 0) return;
    auto& cq = queue_of(q, op);
    // An empty bias is passed as a null buffer (allowed for __global
    // pointers) and flagged, since the kernel must not read it.
    const cl_mem b = bias ? mem(bias) : nullptr;
    const cl_int has_bias = bias ? 1 : 0;
    launch(cq, op, kConv1d, range1d(total), mem(x), mem(w), b, has_bias, mem(y), cl_int{s.batch},
           cl_int{s.in_channels}, cl_int{s.out_channels}, cl_int{s.in_length}, cl_int{s.kernel},
           cl_int{s.stride}, cl_int{s.dilation}, cl_int{s.padding}, cl_int{s.groups}, out_len);
}

void OpenClBackend::conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                          const DeviceBuffer& w, const DeviceBuffer& bias,
                                          DeviceBuffer& y) {
    const char* op = "conv_transpose1d";
    begin(op);
    const cl_int out_len = s.transpose_out_length();
    const std::size_t total = static_cast<std::size_t>(std::max(s.batch, 0)) *
                              static_cast<std::size_t>(std::max(s.out_channels, 0)) *
                              static_cast<std::size_t>(std::max(out_len, 0));
    if (total == 0) return;
    auto& cq = queue_of(q, op);
    const cl_mem b = bias ? mem(bias) : nullptr;
    const cl_int has_bias = bias ? 1 : 0;
    launch(cq, op, kConvTranspose1d, range1d(total), mem(x), mem(w), b, has_bias, mem(y),
           cl_int{s.batch}, cl_int{s.in_channels}, cl_int{s.out_channels}, cl_int{s.in_length},
           cl_int{s.kernel}, cl_int{s.stride}, cl_int{s.dilation}, cl_int{s.padding},
           cl_int{s.groups}, out_len);
}

void OpenClBackend::layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                    const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                    DeviceBuffer& y) {
    const char* op = "layer_norm";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;  // one work-group per row
    r.global[0] = static_cast<std::size_t>(rows) * kLayerNormGroup;
    r.local[0] = kLayerNormGroup;
    launch(cq, op, kLayerNorm, r, cl_int{cols}, eps, mem(x), mem(gamma), mem(beta), mem(y));
}

void OpenClBackend::axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x,
                               float beta, DeviceBuffer& y) {
    const char* op = "axpby";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kAxpby, range1d(n), mem(x), mem(y), count, alpha, beta);
}

void OpenClBackend::copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                   std::size_t src_offset, std::size_t src_stride,
                                   DeviceBuffer& dst, std::size_t dst_offset,
                                   std::size_t dst_stride) {
    const char* op = "copy_rows";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    // A rectangle copy: rows are the second dimension, in bytes.
    const std::size_t src_origin[3] = {src_offset * sizeof(float), 0, 0};
    const std::size_t dst_origin[3] = {dst_offset * sizeof(float), 0, 0};
    const std::size_t region[3] = {static_cast<std::size_t>(cols) * sizeof(float),
                                   static_cast<std::size_t>(rows), 1};
    cl_event ev = nullptr;
    check(clEnqueueCopyBufferRect(cq.queue.get(), mem(src), mem(dst), src_origin, dst_origin,
                                  region, src_stride * sizeof(float), 0, dst_stride * sizeof(float),
                                  0, 0, nullptr, &ev),
          "clEnqueueCopyBufferRect", op);
    cq.pending.push_back({op, Event(), Event(ev)});
    collect_timings(cq, false);
}

void OpenClBackend::transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                   DeviceBuffer& y) {
    const char* op = "transpose";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    Range r;
    r.dims = 2;
    r.global[0] = round_up(static_cast<std::size_t>(cols), kTransposeTile);
    r.global[1] = round_up(static_cast<std::size_t>(rows), kTransposeTile);
    r.local[0] = r.local[1] = kTransposeTile;
    launch(cq, op, kTranspose, r, cl_int{rows}, cl_int{cols}, mem(x), mem(y));
}

void OpenClBackend::add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias,
                                  bool per_row, DeviceBuffer& y) {
    const char* op = "add_bias";
    begin(op);
    if (rows <= 0 || cols <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    const cl_int row_wise = per_row ? 1 : 0;
    launch(cq, op, kAddBias, range1d(total), cl_int{rows}, cl_int{cols}, mem(bias), row_wise,
           mem(y));
}

void OpenClBackend::polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                        const DeviceBuffer& x, DeviceBuffer& y) {
    const char* op = "polar_spectrum";
    begin(op);
    if (frames <= 0 || bins <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(frames) * static_cast<std::size_t>(bins);
    launch(cq, op, kPolarSpectrum, range1d(total), cl_int{frames}, cl_int{bins}, max_magnitude,
           mem(x), mem(y));
}

void OpenClBackend::frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                      int n_frames, const DeviceBuffer& window,
                                      DeviceBuffer& frames) {
    const char* op = "frame_signal";
    begin(op);
    if (n_fft <= 0 || n_frames <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(n_fft) * static_cast<std::size_t>(n_frames);
    launch(cq, op, kFrameSignal, range1d(total), mem(signal), cl_int{n_fft}, cl_int{hop},
           cl_int{n_frames}, mem(window), mem(frames));
}

void OpenClBackend::overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                     int n_frames, const DeviceBuffer& window, DeviceBuffer& out) {
    const char* op = "overlap_add";
    begin(op);
    if (n_fft <= 0 || n_frames <= 0 || hop <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t len =
        static_cast<std::size_t>(n_frames - 1) * static_cast<std::size_t>(hop) + n_fft;
    launch(cq, op, kOverlapAdd, range1d(len), mem(frames), cl_int{n_fft}, cl_int{hop},
           cl_int{n_frames}, mem(window), mem(out));
}

void OpenClBackend::complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                          DeviceBuffer& c, std::size_t n) {
    const char* op = "complex_multiply";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kComplexMultiply, range1d(n), mem(a), mem(b), mem(c), count);
}

void OpenClBackend::complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                     std::size_t n) {
    const char* op = "complex_exp";
    begin(op);
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kComplexExp, range1d(n), mem(x), mem(y), count);
}

void OpenClBackend::minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                            DeviceBuffer& y) {
    const char* op = "minimum_phase_fold";
    begin(op);
    if (n <= 0 || batch <= 0) return;
    auto& cq = queue_of(q, op);
    const std::size_t total = static_cast<std::size_t>(n) * static_cast<std::size_t>(batch);
    launch(cq, op, kMinimumPhaseFold, range1d(total), cl_int{n}, cl_int{batch}, mem(x), mem(y));
}

void OpenClBackend::gated_tanh_impl(Queue& q, int channels, int length, const DeviceBuffer& x,
                                    DeviceBuffer& y) {
    const char* op = "gated_tanh";
    begin(op);
    const std::size_t n = static_cast<std::size_t>(std::max(channels, 0)) *
                          static_cast<std::size_t>(std::max(length, 0));
    if (n == 0) return;
    auto& cq = queue_of(q, op);
    const cl_ulong count = n;
    launch(cq, op, kGatedTanh, range1d(n), mem(x), mem(y), count);
}

// ---- FFT ----

// Returns the cached plan for (n, batch, direction), creating and baking it
// on first use with `bake_queue` (any queue of this context).
OpenClBackend::FftPlan& OpenClBackend::fft_plan(int n, int batch, bool forward, void* bake_queue) {
    const char* op = forward ? "planning an rfft" : "planning an irfft";
    FftPlan* plan = nullptr;
    {
        std::lock_guard lock(s_->fft_mu);
        auto& slot = s_->plans[{n, batch, forward}];
        if (!slot) {
            auto p = std::make_unique<FftPlan>();
            const std::size_t length = static_cast<std::size_t>(n);
            const std::size_t bins = length / 2 + 1;
            std::size_t stride = 1;
            clfftStatus st =
                clfftCreateDefaultPlan(&p->handle, s_->context.get(), CLFFT_1D, &length);
            const auto fail_if = [&](clfftStatus status, const char* fn) {
                if (status != CLFFT_SUCCESS) {
                    s_->plans.erase({n, batch, forward});
                    fail(status, fn, op);
                }
            };
            fail_if(st, "clfftCreateDefaultPlan");
            fail_if(clfftSetPlanPrecision(p->handle, CLFFT_SINGLE), "clfftSetPlanPrecision");
            fail_if(forward ? clfftSetLayout(p->handle, CLFFT_REAL, CLFFT_HERMITIAN_INTERLEAVED)
                            : clfftSetLayout(p->handle, CLFFT_HERMITIAN_INTERLEAVED, CLFFT_REAL),
                    "clfftSetLayout");
            fail_if(clfftSetResultLocation(p->handle, CLFFT_OUTOFPLACE), "clfftSetResultLocation");
            fail_if(clfftSetPlanBatchSize(p->handle, static_cast<std::size_t>(batch)),
                    "clfftSetPlanBatchSize");
            // clFFT's default strides and distances do not describe packed
            // Hermitian rows of n/2+1: state them. Distances count elements
            // of each side's layout (floats for real, complex for Hermitian).
            fail_if(clfftSetPlanInStride(p->handle, CLFFT_1D, &stride), "clfftSetPlanInStride");
            fail_if(clfftSetPlanOutStride(p->handle, CLFFT_1D, &stride), "clfftSetPlanOutStride");
            fail_if(forward ? clfftSetPlanDistance(p->handle, length, bins)
                            : clfftSetPlanDistance(p->handle, bins, length),
                    "clfftSetPlanDistance");
            // The reference returns x for irfft(rfft(x)): forward unscaled,
            // inverse scaled by 1/n (clFFT's defaults, set to be explicit).
            fail_if(clfftSetPlanScale(p->handle, CLFFT_FORWARD, 1.0f), "clfftSetPlanScale");
            fail_if(clfftSetPlanScale(p->handle, CLFFT_BACKWARD, 1.0f / static_cast<float>(n)),
                    "clfftSetPlanScale");
            slot = std::move(p);
        }
        plan = slot.get();
    }
    std::lock_guard lock(plan->mu);
    if (!plan->baked) {
        cl_command_queue q = static_cast<cl_command_queue>(bake_queue);
        check(clfftBakePlan(plan->handle, 1, &q, nullptr, nullptr), "clfftBakePlan", op);
        check(clfftGetTmpBufSize(plan->handle, &plan->tmp_bytes), "clfftGetTmpBufSize", op);
        plan->baked = true;
    }
    return *plan;
}

void OpenClBackend::prewarm_fft(int n, int batch) {
    if (n <= 0 || batch <= 0) return;
    std::lock_guard lock(s_->internal_mu);
    fft_plan(n, batch, true, s_->internal.get());
    fft_plan(n, batch, false, s_->internal.get());
}

void OpenClBackend::run_fft(Queue& q, const char* op, int n, int batch, bool forward, void* in,
                            void* out) {
    auto& cq = queue_of(q, op);
    FftPlan& plan = fft_plan(n, batch, forward, cq.queue.get());
    cl_int err = CL_SUCCESS;
    if (plan.tmp_bytes > cq.fft_tmp_bytes) {
        // Replacing a smaller buffer is safe: the runtime keeps it alive until
        // the commands already enqueued with it have run.
        cq.fft_tmp.reset(
            clCreateBuffer(s_->context.get(), CL_MEM_READ_WRITE, plan.tmp_bytes, nullptr, &err));
        check(err, "clCreateBuffer", op);
        cq.fft_tmp_bytes = plan.tmp_bytes;
    }
    cl_mem src = static_cast<cl_mem>(in);
    cl_mem dst = static_cast<cl_mem>(out);
    cl_event start = nullptr;
    if (!forward) {
        // clFFT's complex-to-real transforms may overwrite their input, which
        // the interface (and the CPU reference) leaves intact: transform a
        // copy. The copy's event also marks where the op starts.
        const std::size_t bytes = static_cast<std::size_t>(batch) * (n / 2 + 1) * 2 * sizeof(float);
        if (bytes > cq.fft_scratch_bytes) {
            cq.fft_scratch.reset(
                clCreateBuffer(s_->context.get(), CL_MEM_READ_WRITE, bytes, nullptr, &err));
            check(err, "clCreateBuffer", op);
            cq.fft_scratch_bytes = bytes;
        }
        check(clEnqueueCopyBuffer(cq.queue.get(), src, cq.fft_scratch.get(), 0, 0, bytes, 0,
                                  nullptr, &start),
              "clEnqueueCopyBuffer", op);
        src = cq.fft_scratch.get();
        cl_event edges = nullptr;
        const Range r = range1d(static_cast<std::size_t>(batch));
        const ClResult res =
            enqueue_kernel(cq.queue.get(), cq.kernels[kHermitianEdges].get(), r.dims, r.global,
                           r.local, &edges, cl_int{batch}, cl_int{n}, src);
        check(res.err, res.function, op);
        clReleaseEvent(edges);
    } else {
        // clFFT may run several kernels and returns the event of the last
        // one: a marker before them gives the op's start time.
        check(clEnqueueMarkerWithWaitList(cq.queue.get(), 0, nullptr, &start),
              "clEnqueueMarkerWithWaitList", op);
    }
    Event start_event(start);
    cl_event end = nullptr;
    cl_command_queue queue = cq.queue.get();
    {
        std::lock_guard lock(plan.mu);
        check(clfftEnqueueTransform(plan.handle, forward ? CLFFT_FORWARD : CLFFT_BACKWARD, 1,
                                    &queue, 0, nullptr, &end, &src, &dst,
                                    plan.tmp_bytes > 0 ? cq.fft_tmp.get() : nullptr),
              "clfftEnqueueTransform", op);
    }
    cq.pending.push_back({op, std::move(start_event), Event(end)});
    collect_timings(cq, false);
}

void OpenClBackend::rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                              DeviceBuffer& out) {
    const char* op = "rfft";
    begin(op);
    if (n <= 0 || batch <= 0) return;
    run_fft(q, op, n, batch, true, in.handle(), out.handle());
}

void OpenClBackend::irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                               DeviceBuffer& out) {
    const char* op = "irfft";
    begin(op);
    if (n <= 0 || batch <= 0) return;
    run_fft(q, op, n, batch, false, in.handle(), out.handle());
}

}  // namespace etude::gpu
