// The OpenCL backend's core: error names, construction (context, program,
// kernel warm-up), memory and pinned memory, queues, host/device copies,
// synchronisation and timings. The operations are in opencl_ops.cpp, the FFTs
// in opencl_fft.cpp; the state they share in opencl_backend_state.h.
#include "gpu/opencl/opencl_backend.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/opencl/opencl_backend_state.h"

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

// Profiling events kept per queue before finished ones are read back even
// without a synchronize(), so a queue that is never synchronised stays bounded.
constexpr std::size_t kMaxPendingEvents = 1024;

std::string first_lines(const std::string& text, int lines) {
    std::istringstream in(text);
    std::string line, out;
    for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
    return out;
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
    track(cq);
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
    track(cq);
}

void OpenClBackend::synchronize(Queue& q) {
    refuse_while_recording(q, "synchronize");
    auto& cq = queue_of(q, "synchronize");
    check(clFinish(cq.queue.get()), "clFinish", "synchronizing a queue");
    collect_timings(cq, true);
}

void OpenClBackend::track(ClQueue& q) {
    if (profiling())
        collect_timings(q, false);
    else
        q.pending.pop_back();
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
    for (const auto& [name, ms] : measured) s_->timings.record(name, ms);
}

std::vector<KernelTiming> OpenClBackend::kernel_timings() const {
    return s_->timings.snapshot();
}

void OpenClBackend::reset_timings() {
    s_->timings.clear();
}

}  // namespace etude::gpu
