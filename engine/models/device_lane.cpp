#include "engine/models/device_lane.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <system_error>

#include "gpu/backend.h"
#include "rt/cpu_pin.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

namespace {

// ETUDE_DEVICE_LANES=network: a lane per joiner, as before the device's
// lane (read once: the lanes' sharing does not change under a process).
bool lane_per_network() {
    static const bool per_network = [] {
        const char* v = std::getenv("ETUDE_DEVICE_LANES");
        return v && std::strcmp(v, "network") == 0;
    }();
    return per_network;
}

}  // namespace

std::shared_ptr<DeviceLane> DeviceLane::shared(const void* device, int nice) {
    if (!device || lane_per_network()) return std::make_shared<DeviceLane>(nice);
    static std::mutex mu;
    static std::map<std::pair<const void*, int>, std::weak_ptr<DeviceLane>> lanes;
    std::lock_guard lock(mu);
    std::erase_if(lanes, [](const auto& kv) { return kv.second.expired(); });
    std::weak_ptr<DeviceLane>& slot = lanes[{device, nice}];
    std::shared_ptr<DeviceLane> lane = slot.lock();
    if (!lane) {
        lane = std::make_shared<DeviceLane>(nice);
        slot = lane;
    }
    return lane;
}

DeviceLane::~DeviceLane() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (!thread_.joinable()) return;
    // Never on its own thread: its last joiner lets go of it only after
    // its own end has waited out its running batch, and run() still uses
    // the lane after a batch returns.
    if (thread_.get_id() == std::this_thread::get_id()) std::terminate();
    thread_.join();
}

void DeviceLane::start_locked() {
    if (thread_.joinable()) return;
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
        throw gpu::DeviceError(std::string("could not start a device lane's thread: ") + e.what());
    }
}

void DeviceLane::detach_locked(LaneQueue* q) {
    std::erase(queues_, q);
}

void DeviceLane::pause() {
    std::lock_guard lock(mu_);
    paused_ = true;
}

void DeviceLane::resume() {
    {
        std::lock_guard lock(mu_);
        paused_ = false;
    }
    cv_.notify_all();
}

std::uint64_t DeviceLane::batches() const {
    std::lock_guard lock(mu_);
    return batches_;
}

bool DeviceLane::busy() const {
    std::lock_guard lock(mu_);
    return running_;
}

std::pair<LaneQueue*, std::int64_t> DeviceLane::next_locked() {
    const std::int64_t now = rt::now_ns();
    LaneQueue* best = nullptr;
    LaneRank best_rank;
    std::int64_t wake = 0;
    for (LaneQueue* q : queues_) {
        if (!q->has_work() || (paused_ && !q->closing())) continue;
        if (const std::int64_t until = q->hold_until(now); until > 0) {
            wake = wake == 0 ? until : std::min(wake, until);
            continue;
        }
        const LaneRank rank = q->urgency(now);
        if (!best || rank < best_rank) {
            best = q;
            best_rank = rank;
        }
    }
    return {best, wake};
}

void DeviceLane::run() {
    // Its own class, not its first pusher's (a thread starts with its
    // maker's policy, nice value and CPUs): the offline lane below normal
    // work, as its readers; the live lane at the producers' real-time
    // priority where the OS allows it, so that a live producer raised to it
    // does not wait on a lane at a lower one, else at normal priority. (A
    // lane made by a thread that stepped down, which no live producer is,
    // would keep that nice value: a thread may not raise itself again.)
    rt::use_process_cpus();
    if (nice_ > 0)
        rt::make_current_thread_background(nice_);
    else if (!rt::make_current_thread_realtime(rt::kWorkerPriority))
        rt::make_current_thread_background(0);
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) return;  // (its last joiner has gone: nothing waits)
        auto [next, wake] = next_locked();
        if (next) {
            const std::int64_t from = rt::now_ns();
            running_ = true;
            next->run_one(lock);
            running_ = false;
            busy_ns_ += rt::now_ns() - from;
            ++batches_;
            continue;
        }
        if (wake > 0)
            cv_.wait_until(lock,
                           std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake)));
        else
            cv_.wait(lock);
    }
}

}  // namespace etude::engine
