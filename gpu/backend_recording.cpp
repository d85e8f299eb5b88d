// Backend::record() and Backend::replay(), written once for every backend:
// the checks of the contract in backend.h, the native recordings' hooks
// (Vulkan, CUDA) and the fallback's log of calls (CPU, OpenCL).
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpu/backend.h"
#include "gpu/op_log.h"

namespace etude::gpu {
namespace {

std::atomic<std::uint64_t> next_queue_id{1};

[[noreturn]] void reject(const char* op, const std::string& what) {
    throw std::invalid_argument(std::string(op) + ": " + what);
}

}  // namespace

Queue::Queue() : id_(next_queue_id.fetch_add(1, std::memory_order_relaxed)) {}

void Backend::refuse_while_recording(const Queue& q, const char* op) {
    if (q.recording())
        reject(op, "not allowed inside a recording (the body's work is recorded, not run)");
}

Recording Backend::record(Queue& q, const std::function<void(Queue&)>& body) {
    if (!body) reject("record", "no body to record");
    if (q.recording_) reject("record", "the queue is already recording (recordings do not nest)");
    const bool native = begin_recording_impl(q);
    std::shared_ptr<OpLog> log = native ? nullptr : std::make_shared<OpLog>();
    q.recording_ = true;
    q.recorded_ops_ = 0;
    q.op_log_ = log.get();
    const auto stop = [&] {
        q.recording_ = false;
        q.op_log_ = nullptr;
    };
    try {
        body(q);
    } catch (...) {
        stop();
        if (native) abort_recording_impl(q);
        throw;
    }
    stop();
    if (q.recorded_ops_ == 0) {
        if (native) abort_recording_impl(q);
        reject("record", "the body issued no operation on the queue");
    }
    Recording r;
    r.backend_ = this;
    r.queue_id_ = q.id_;
    r.native_ = native;
    r.operations_ = q.recorded_ops_;
    if (native)
        r.work_ = end_recording_impl(q);
    else
        r.work_ = std::move(log);
    return r;
}

void Backend::replay(Queue& q, const Recording& r) {
    if (r.empty()) reject("replay", "the recording is empty (default-constructed or moved from)");
    if (r.backend_ != this)
        reject("replay", "the recording was made on another backend than " + info().name);
    if (r.queue_id_ != q.id_)
        reject("replay",
               "the recording was made on another queue (a recording replays only on its own)");
    if (q.recording_) reject("replay", "not allowed inside a recording (recordings do not nest)");
    if (r.native_) {
        replay_impl(q, r.work_);
        return;
    }
    // The fallback: the recorded calls, one by one, as the body made them.
    const double late_ms = consume_fault("replay");
    if (late_ms > 0)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(late_ms));
    for (const auto& op : static_cast<const OpLog&>(*r.work_).ops) op(q);
}

}  // namespace etude::gpu
