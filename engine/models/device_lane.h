// One thread per device and class of stream that runs the batches of every
// network on that device, most urgent first: the "one queue per device
// across networks" of issue 41 (engine/executor/README.md). Each network's
// joiner (stream_joiner.h) still forms its own batches, since only pushes
// of one network share a batch; the lane decides whose batch runs next.
//
// Before, each joiner had a thread of its own: a Piper voice on a GPU ran
// three (its sentences' analysis, its flow, its decoder) per class, and
// every further voice three more, all handing work to the one device at
// once in whatever order the OS ran them. Now the device's work for a class
// is one queue: the lane runs the batch whose most urgent push ranks first
// (joiner's rank: a push with no slack, or whose wait has passed, before
// any with some; then the earliest time a push may wait until, which
// deadline.h's join_wait_until_ns() makes later for a later deadline; then
// the first to come), whichever network it is of. While one joiner holds a
// batch back for its members within their slack, the lane runs the others'.
//
// Classes stay apart, as before: live streams' batches on a lane at the
// producers' real-time priority (where the OS allows it), offline readers'
// on one below normal (rt::kOfflineNice), so a live batch never waits at a
// reader's priority behind one of theirs.
//
// `shared()` gives the lane of a device and class, one per process, while a
// joiner holds it; a joiner made with no device (the tests' plain joiners)
// has one of its own. ETUDE_DEVICE_LANES=network gives each joiner a lane
// of its own on a device too, as before, for comparing the two on a GPU
// (docs/backends.md).
//
// Locking: the lane's mutex guards every joiner's state on it (a push is a
// few words under it), so the lane's thread sees all its queues at once.
// Not real-time safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace etude::engine {

// A push's place in the lane's order (smaller first).
struct LaneRank {
    std::int64_t until_ns = 0;    // 0: no slack left; else the time it may wait until
    std::int64_t arrived_ns = 0;  // ties: the first to come
    bool operator<(const LaneRank& o) const {
        return until_ns != o.until_ns ? until_ns < o.until_ns : arrived_ns < o.arrived_ns;
    }
};

// What the lane asks of a joiner; every call under the lane's mutex.
class LaneQueue {
  public:
    virtual ~LaneQueue() = default;
    // Whether it has pushes the lane may run (some waiting, not paused).
    virtual bool has_work() const = 0;
    // Whether it is ending: the lane runs what it has left even while the
    // lane is paused (a test's pause must not hold a joiner's end).
    virtual bool closing() const = 0;
    // At `now`: 0 when a batch may start; else the time until which it
    // holds its pushes back for its lane's members.
    virtual std::int64_t hold_until(std::int64_t now) = 0;
    // Its most urgent push's rank at `now`.
    virtual LaneRank urgency(std::int64_t now) const = 0;
    // Forms and runs one batch; may unlock `lock` while it runs and holds
    // it again when it returns.
    virtual void run_one(std::unique_lock<std::mutex>& lock) = 0;
};

class DeviceLane {
  public:
    // `nice`: the lane thread's (0: real-time where allowed; 1..19 below
    // normal, rt::make_current_thread_background).
    explicit DeviceLane(int nice = 0) : nice_(nice) {}
    ~DeviceLane();
    DeviceLane(const DeviceLane&) = delete;
    DeviceLane& operator=(const DeviceLane&) = delete;

    // The lane of `device` (its backend's address) and `nice`, shared by
    // every joiner on it while any holds it (ETUDE_DEVICE_LANES=network:
    // a new one each call).
    static std::shared_ptr<DeviceLane> shared(const void* device, int nice);

    std::mutex& mutex() { return mu_; }
    // Wakes the lane's thread (after a push, a leave, a resume).
    void wake() { cv_.notify_all(); }
    // Under mutex(): starts the thread if it has not started. Throws
    // gpu::DeviceError where it cannot (the caller's device-error path has
    // the CPU make the work).
    void start_locked();
    // Under mutex(): whether a test has paused it.
    bool paused_locked() const { return paused_; }
    // Under mutex(): the time its batches have run so far, all joiners'
    // (ns; counted as each ends).
    std::int64_t busy_ns_locked() const { return busy_ns_; }
    // Under mutex(): a joiner comes and goes (the joiner waits until it
    // has nothing waiting or running before it goes).
    void attach_locked(LaneQueue* q) { queues_.push_back(q); }
    void detach_locked(LaneQueue* q);

    // For tests: while paused no batch starts, of any joiner; resume()
    // lets the lane run what waits, most urgent first.
    void pause();
    void resume();
    // Batches run on this lane, of all its joiners; whether one runs now.
    std::uint64_t batches() const;
    bool busy() const;

  private:
    void run();
    // Under mu_: the joiner whose batch runs next (null: none may run now)
    // and, where none may, the earliest time a held batch may start (0:
    // none is held). While paused, only a joiner that is ending may run.
    std::pair<LaneQueue*, std::int64_t> next_locked();

    const int nice_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<LaneQueue*> queues_;
    bool running_ = false, paused_ = false, stopping_ = false;
    std::uint64_t batches_ = 0;
    std::int64_t busy_ns_ = 0;
    std::thread thread_;  // last: started at the first push, joined first
};

}  // namespace etude::engine
