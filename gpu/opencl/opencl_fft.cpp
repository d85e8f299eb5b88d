// The OpenCL backend's FFTs: clFFT's process-wide setup, plans cached per
// (n, batch, direction) and baked on first use or in prewarm_fft(), and
// rfft/irfft enqueued through them.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "gpu/opencl/opencl_backend_state.h"

namespace etude::gpu {
namespace {

// True once clFFT has been torn down at exit: plans still alive then (a
// backend in a static that outlived it) must not be destroyed through it.
std::atomic<bool> g_clfft_torn_down{false};

}  // namespace

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

OpenClBackend::FftPlan::~FftPlan() {
    if (handle && !g_clfft_torn_down) clfftDestroyPlan(&handle);
}

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
    track(cq);
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