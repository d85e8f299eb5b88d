// Pushes of several streams of one network, made on their own threads (each
// stream's producer), run as one batch by the lane's own thread: the device
// lane of the executor that issue 41 asks for (engine/executor/README.md).
// A producer hands its push to the lane and waits (push()); the lane's
// thread forms each batch from the pushes waiting, the most urgent first,
// runs it, and hands each push its result. Or one thread hands over pushes
// of many streams (submit(), each with a Ticket it keeps) and waits for
// each, or is told when it has run: a few threads then feed a device's
// batches, as the executor's steps will. A push that arrives while a batch
// runs goes in the next one, with every other push that arrived
// meanwhile. (Before, the producer whose push started a batch ran it for
// all of them, flat combining: a batch then ran at that producer's
// priority, its order was the order the pushes came, and no thread was
// the device's.)
//
// Batches formed on purpose, within each push's slack: a stream is a member
// of its lane while its utterance is open (JoinMembership: from its first
// push to its flush), and while some members have not pushed the lane
// waits for them before it starts a batch, until every member is in, until
// a member leaves, or until the earliest `wait_until_ns` of the pushes
// waiting (each caller's share of its chunk's slack, deadline.h's
// join_wait_until_ns(); 0: no wait, and a push with none that comes during
// a wait ends it). Without it the streams' pushes seldom meet: producers
// paced by their rings keep the phases their listeners started at, up to a
// chunk's period apart, and a push's batch is short beside that
// (docs/benchmarks.md, "Why the device's pushes seldom meet"). Once a push
// has waited (for members, or behind a running batch) the lane does not
// wait for members for it again: what arrives behind a batch already meets
// the next one. The members that come early wait for the latest each time,
// and so keep that much less audio ahead, within their slack.
//
// Which pushes a batch takes when it cannot take all (a batch that ran out
// of device memory bounds the later ones): the earliest due first, as
// deadline.h orders work. A push with no slack (wait_until_ns 0: a stream's
// first audio, or one already late) goes before every push with some, and
// those by their wait_until_ns, which join_wait_until_ns() makes later for
// a later deadline; pushes of one rank go in the order they came, and a
// push whose time to wait has passed ranks with those with no slack, so
// none is passed over for good. A batch runs its pushes in that order too.
//
// One joiner for every network that batches its streams, over the push it
// takes (`Push`: a decoder's chunk, StreamPush, vocoder_network.h, run by
// NetworkStream::push_together; a Piper flow's block, VitsFlowPush,
// vits/flow_stream.h; a Piper sentence's analysis, VitsAnalysisPush,
// vits/text_analysis_network.h). The joiner knows nothing of what a push
// holds. Its batches run on a device lane's thread (device_lane.h): one per
// device and class of stream, shared by every network's joiner on that
// device, which runs the most urgent of their batches first. The thread
// starts at the first push (a network whose streams never join, as on the
// CPU, starts none). The live lane runs at the live producers' real-time
// priority where the OS allows it (rt::kWorkerPriority; a raised producer
// does not wait on a lower lane), the offline readers' at their lowered
// priority (rt::kOfflineNice), so that a live batch never waits behind one
// of theirs at it.
//
// Worth it where one call for many streams is cheaper than one call each: a
// GPU (an H200 made 16 HiFi-GAN streams' 4-frame chunks twice as fast
// together, docs/benchmarks.md). On the CPU it is not: a batch would run on
// one thread what the producers otherwise run side by side, and a chunk
// alone stays in cache from layer to layer.
//
// Errors: an exception from the batch reaches every push in it, so each
// stream handles a device error as its own (MelVocoderStream restores its
// state and the caller remakes the chunk elsewhere; a Piper stream's CPU
// flow takes its sentence over). A batch that ran out of device memory also
// halves the batches from then on (JoinStats::cap): more streams than the
// device holds at once go in smaller batches rather than every batch
// failing over to the CPU. Not real-time safe.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/models/device_lane.h"
#include "engine/models/stream_layers.h"
#include "engine/models/vocoder_network.h"
#include "gpu/backend.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

struct JoinStats {
    std::uint64_t batches = 0;        // batches run
    std::uint64_t pushes = 0;         // pushes in them
    std::uint64_t largest = 0;        // pushes in the largest
    std::uint64_t cap = 0;            // the most a batch takes now; 0: no bound
    std::uint64_t out_of_memory = 0;  // batches that ran out of device memory
    std::uint64_t waited = 0;         // batches the lane held back for members
    std::uint64_t all_members = 0;    // batches that held every member of the lane
    std::int64_t waited_ns = 0;       // the lane's time waiting for members
};

// Time this thread's pushes spent waiting for a batch to gather its lane's
// members (not behind a running batch: that is the device's latency). A
// caller that times its push subtracts it, so that a device's measured
// speed, which decides whether the next chunk goes there, is not the
// waiting it chose to do.
inline std::int64_t& join_gather_wait_ns_on_this_thread() {
    thread_local std::int64_t ns = 0;
    return ns;
}

template <class Push>
class PushJoiner final : public LaneQueue {
  public:
    using RunBatch = std::function<void(std::span<const Push>)>;

    // On a lane of its own; `nice`: the lane thread's (0..19;
    // rt::make_current_thread_background).
    explicit PushJoiner(int nice = 0) : PushJoiner(std::make_shared<DeviceLane>(nice)) {}
    // On `lane`, beside the other joiners there (DeviceLane::shared(): a
    // device's).
    explicit PushJoiner(std::shared_ptr<DeviceLane> lane) : lane_(std::move(lane)) {
        std::lock_guard lock(lane_->mutex());
        lane_->attach_locked(this);
    }
    ~PushJoiner() override;
    PushJoiner(const PushJoiner&) = delete;
    PushJoiner& operator=(const PushJoiner&) = delete;

    // Runs `push` in a batch on the lane's thread (through the `run` of the
    // batch's first push, with the pushes waiting beside it) and returns
    // once it has run; rethrows the batch's exception. `wait_until_ns`
    // (rt::now_ns()'s clock): how long this push may wait for the lane's
    // other members before its batch starts; 0, not at all.
    // submit() and wait() of one Ticket.
    void push(const Push& push, const RunBatch& run, std::int64_t wait_until_ns = 0);

    class Ticket;
    // Called on the lane's thread once a submitted push's batch has run
    // (outside the lane's mutex, after wait() would return): it may hand
    // the stream back to whoever steps it, not run the stream's work.
    using OnDone = std::function<void()>;
    // Hands `push` to the lane as push() does, and returns at once: the
    // push waits in `ticket`, which the caller keeps, with `run`, alive
    // until its batch has run (wait(), or ~Ticket waits). One thread may
    // submit pushes of many streams, each member of the lane, and the lane
    // then holds their batch for all of them as for pushes on threads of
    // their own. Throws gpu::DeviceError where the lane cannot start
    // (the ticket is then not submitted).
    void submit(Ticket& ticket, const Push& push, const RunBatch& run,
                std::int64_t wait_until_ns = 0, OnDone on_done = {});
    // A temporary `run` would be gone before the batch runs.
    void submit(Ticket&, const Push&, RunBatch&&, std::int64_t = 0, OnDone = {}) = delete;
    // Whether a submitted push's batch has run.
    bool done(const Ticket& ticket) const {
        std::lock_guard lock(lane_->mutex());
        return ticket.waiter_ && ticket.waiter_->done;
    }
    // Returns once a submitted push's batch has run, and rethrows its
    // exception; the ticket may then be submitted again. Its share of the
    // wait for members goes to this thread's join_gather_wait_ns_on_this_thread().
    void wait(Ticket& ticket);

    // The lane's members (JoinMembership calls these): streams whose next
    // push a batch may wait for. leave() ends a wait that was only for it.
    void enter() {
        std::lock_guard lock(lane_->mutex());
        ++members_;
    }
    void leave() {
        {
            std::lock_guard lock(lane_->mutex());
            if (members_ > 0) --members_;
        }
        lane_->wake();
    }
    std::size_t members() const {
        std::lock_guard lock(lane_->mutex());
        return members_;
    }
    JoinStats stats() const {
        std::lock_guard lock(lane_->mutex());
        return stats_;
    }

    // For tests: while paused, pushes wait and no batch starts; resume()
    // lets the lane run the pushes waiting (in one batch, unless out of
    // memory bounded them). waiting() counts them.
    void pause() {
        std::lock_guard lock(lane_->mutex());
        paused_ = true;
    }
    void resume() {
        {
            std::lock_guard lock(lane_->mutex());
            paused_ = false;
        }
        lane_->wake();
    }
    std::size_t waiting() const {
        std::lock_guard lock(lane_->mutex());
        return waiting_.size();
    }
    // Whether the lane holds its pushes waiting back for its members now.
    bool holding() const {
        std::lock_guard lock(lane_->mutex());
        return gathering_from_ != 0;
    }

    // LaneQueue: what the lane's thread asks, under the lane's mutex.
    bool has_work() const override { return !paused_ && !waiting_.empty(); }
    bool closing() const override { return closing_; }
    std::int64_t hold_until(std::int64_t now) override;
    LaneRank urgency(std::int64_t now) const override;
    void run_one(std::unique_lock<std::mutex>& lock) override;

  private:
    struct Waiter {
        Push push;
        const RunBatch* run = nullptr;  // the caller's, alive while it waits
        std::int64_t wait_until_ns = 0;
        std::int64_t arrived_ns = 0, gathered_ns = 0;  // came; waited for members
        std::int64_t lane_busy_at_arrival_ns = 0;      // DeviceLane::busy_ns_locked() then
        bool may_wait = true;  // has not waited yet (for members or a batch)
        bool done = false;
        std::exception_ptr error;
        OnDone on_done;  // submit()'s, taken by the lane when the batch has run
    };
    // Under the lane's mutex: the lane holds the pushes waiting back for
    // its members: some are missing, every push waiting may still wait,
    // and their time has not passed.
    bool should_wait_for_members(std::int64_t now) const;
    // Under the lane's mutex: the earliest time the pushes waiting may wait
    // until (0: one may not wait).
    std::int64_t earliest_wait_until() const;
    // A push's rank at `now`: one whose time to wait has passed has none
    // left either (ranked with those, it is not passed over for good by
    // pushes with none that keep coming).
    static LaneRank rank_of(const Waiter& w, std::int64_t now) {
        return {w.wait_until_ns <= now ? std::int64_t{0} : w.wait_until_ns, w.arrived_ns};
    }
    // Under the lane's mutex: the next batch, out of waiting_: the most
    // urgent pushes first, up to the cap.
    std::vector<Waiter*> take_batch();
    // Runs `batch` outside the lane's mutex and records how it went.
    void run_batch(std::unique_lock<std::mutex>& lock, const std::vector<Waiter*>& batch);
    // Under the lane's mutex: `waiters` are done, with `error` if their
    // batch failed; returns their submit()'s `on_done`, taken first (once a
    // waiter is done it may be gone).
    std::vector<OnDone> mark_done(std::span<Waiter* const> waiters, std::exception_ptr error);
    // Calls submit()'s `on_done` of a batch that has run, outside the mutex.
    void tell(std::unique_lock<std::mutex>& lock, std::vector<OnDone>& on_done);

    std::shared_ptr<DeviceLane> lane_;  // its mutex guards all below
    std::condition_variable done_cv_;   // the pushes (and the end) wait on it
    std::vector<Waiter*> waiting_;      // in the order they came
    bool running_ = false, paused_ = false, closing_ = false;
    std::size_t telling_ = 0;               // batches whose on_done are being called
    std::int64_t gathering_from_ = 0;       // since when the lane holds its batch back; 0: not
    std::int64_t gathering_busy_from_ = 0;  // the lane's busy time then
    std::size_t members_ = 0;
    JoinStats stats_;
};

template <class Push>
PushJoiner<Push>::~PushJoiner() {
    // Whatever still waits runs (a push's caller waits for it), paused or
    // not; then the joiner leaves its lane, which ends with its last.
    std::unique_lock lock(lane_->mutex());
    closing_ = true;
    paused_ = false;
    lane_->wake();
    done_cv_.wait(lock, [&] { return waiting_.empty() && !running_ && telling_ == 0; });
    lane_->detach_locked(this);
}

template <class Push>
std::int64_t PushJoiner<Push>::earliest_wait_until() const {
    std::int64_t until = 0;
    for (const Waiter* w : waiting_) {
        if (w->wait_until_ns <= 0) return 0;
        until = until == 0 ? w->wait_until_ns : std::min(until, w->wait_until_ns);
    }
    return until;
}

template <class Push>
bool PushJoiner<Push>::should_wait_for_members(std::int64_t now) const {
    if (closing_ || waiting_.size() >= members_) return false;
    for (const Waiter* w : waiting_)
        if (!w->may_wait) return false;
    return earliest_wait_until() > now;
}

// A push handed over with submit(): the joiner points at its waiter until
// the push's batch has run, so it neither moves nor goes before then (its
// destructor waits for the batch, and drops the batch's error: a caller
// that wants it calls wait()).
template <class Push>
class PushJoiner<Push>::Ticket {
  public:
    Ticket() = default;
    ~Ticket() {
        if (!joiner_) return;
        std::unique_lock lock(joiner_->lane_->mutex());
        joiner_->done_cv_.wait(lock, [&] { return waiter_->done; });
    }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // Handed to a joiner and not yet waited for.
    bool submitted() const { return joiner_ != nullptr; }

  private:
    friend class PushJoiner<Push>;
    PushJoiner<Push>* joiner_ = nullptr;
    std::optional<Waiter> waiter_;  // (a Push need not be default-constructible)
};

template <class Push>
void PushJoiner<Push>::submit(Ticket& ticket, const Push& push, const RunBatch& run,
                              std::int64_t wait_until_ns, OnDone on_done) {
    if (ticket.joiner_) throw std::logic_error("PushJoiner::submit: the ticket is still out");
    Waiter& me = ticket.waiter_.emplace(Waiter{push, &run, wait_until_ns, rt::now_ns()});
    me.on_done = std::move(on_done);
    std::unique_lock lock(lane_->mutex());
    lane_->start_locked();  // throws gpu::DeviceError where it cannot start
    me.lane_busy_at_arrival_ns = lane_->busy_ns_locked();
    // Behind a running batch of its network, or one paused, it has waited:
    // the lane does not hold a batch back for members for it. (A batch
    // gathering takes it in its wait. Other networks' batches on the lane
    // do not count: its own time to wait until bounds a hold behind them.)
    if (running_ || paused_ || lane_->paused_locked()) me.may_wait = false;
    waiting_.push_back(&me);
    ticket.joiner_ = this;
    lock.unlock();
    lane_->wake();  // the lane is idle, or holds a batch back that this push may end
}

template <class Push>
void PushJoiner<Push>::wait(Ticket& ticket) {
    if (ticket.joiner_ != this) throw std::logic_error("PushJoiner::wait: not submitted here");
    Waiter& me = *ticket.waiter_;
    {
        std::unique_lock lock(lane_->mutex());
        done_cv_.wait(lock, [&] { return me.done; });
        ticket.joiner_ = nullptr;
    }
    join_gather_wait_ns_on_this_thread() += me.gathered_ns;
    if (me.error) std::rethrow_exception(std::exchange(me.error, nullptr));
}

template <class Push>
void PushJoiner<Push>::push(const Push& push, const RunBatch& run, std::int64_t wait_until_ns) {
    Ticket ticket;
    submit(ticket, push, run, wait_until_ns);
    wait(ticket);
}

template <class Push>
std::int64_t PushJoiner<Push>::hold_until(std::int64_t now) {
    // While members are missing, the batch waits for them within the
    // pushes' slack. Pushes that come meanwhile join it, and it waits no
    // longer than the earliest of theirs allows: a push with no time to
    // spare (a stream's first audio) ends the wait.
    if (should_wait_for_members(now)) {
        if (gathering_from_ == 0) {
            gathering_from_ = now;
            gathering_busy_from_ = lane_->busy_ns_locked();
        }
        return earliest_wait_until();
    }
    if (gathering_from_ != 0) {
        // The wait is over: those that waited do not wait again, and each
        // push's share of it is its thread's (join_gather_wait_ns_on_this_thread).
        // Not the time the device ran other networks' batches meanwhile:
        // that is the device's latency, which its measured speed must
        // count.
        const std::int64_t busy_now = lane_->busy_ns_locked();
        for (Waiter* w : waiting_) {
            w->may_wait = false;
            const std::int64_t busy =
                busy_now - std::max(gathering_busy_from_, w->lane_busy_at_arrival_ns);
            w->gathered_ns +=
                std::max<std::int64_t>(0, now - std::max(gathering_from_, w->arrived_ns) - busy);
        }
        ++stats_.waited;
        stats_.waited_ns +=
            std::max<std::int64_t>(0, now - gathering_from_ - (busy_now - gathering_busy_from_));
        gathering_from_ = 0;
    }
    return 0;
}

template <class Push>
LaneRank PushJoiner<Push>::urgency(std::int64_t now) const {
    // (Asked only while it has pushes waiting: has_work().)
    LaneRank best = rank_of(*waiting_.front(), now);
    for (const Waiter* w : waiting_) best = std::min(best, rank_of(*w, now));
    return best;
}

template <class Push>
std::vector<typename PushJoiner<Push>::Waiter*> PushJoiner<Push>::take_batch() {
    // A push with no slack first, then by the time each may wait until (a
    // later deadline, a later time), then in the order they came.
    const std::int64_t now = rt::now_ns();
    std::vector<Waiter*> order = waiting_;
    std::stable_sort(order.begin(), order.end(), [&](const Waiter* a, const Waiter* b) {
        return rank_of(*a, now) < rank_of(*b, now);
    });
    const std::size_t take =
        stats_.cap ? std::min<std::size_t>(order.size(), stats_.cap) : order.size();
    order.resize(take);
    // Out of waiting_, in one pass (a thousand streams' pushes wait at once).
    std::vector<const Waiter*> taken(order.begin(), order.end());
    std::sort(taken.begin(), taken.end());
    std::erase_if(waiting_, [&](const Waiter* w) {
        return std::binary_search(taken.begin(), taken.end(), w);
    });
    // Those left wait behind this batch: they do not hold the next back.
    for (Waiter* w : waiting_) w->may_wait = false;
    return order;
}

template <class Push>
void PushJoiner<Push>::run_batch(std::unique_lock<std::mutex>& lock,
                                 const std::vector<Waiter*>& batch) {
    running_ = true;
    lock.unlock();
    std::exception_ptr error;
    bool out_of_memory = false;
    try {
        std::vector<Push> pushes;
        pushes.reserve(batch.size());
        for (const Waiter* w : batch) pushes.push_back(w->push);
        (*batch.front()->run)(pushes);
    } catch (const gpu::OutOfMemory&) {
        error = std::current_exception();
        out_of_memory = true;
    } catch (...) {
        error = std::current_exception();
    }
    lock.lock();
    if (out_of_memory) {
        // Its pushes are remade elsewhere (the error reaches each); the
        // batches after it take half as many, down to one.
        ++stats_.out_of_memory;
        stats_.cap = std::max<std::uint64_t>(1, batch.size() / 2);
    }
    std::vector<OnDone> on_done = mark_done(batch, error);
    ++stats_.batches;
    if (members_ >= 2 && batch.size() >= members_) ++stats_.all_members;
    stats_.pushes += batch.size();
    stats_.largest = std::max<std::uint64_t>(stats_.largest, batch.size());
    running_ = false;
    done_cv_.notify_all();
    tell(lock, on_done);
}

template <class Push>
std::vector<typename PushJoiner<Push>::OnDone> PushJoiner<Push>::mark_done(
    std::span<Waiter* const> waiters, std::exception_ptr error) {
    std::vector<OnDone> on_done;
    for (Waiter* w : waiters) {
        if (w->on_done) on_done.push_back(std::move(w->on_done));
        w->done = true;
        w->error = error;
    }
    return on_done;
}

template <class Push>
void PushJoiner<Push>::tell(std::unique_lock<std::mutex>& lock, std::vector<OnDone>& on_done) {
    if (on_done.empty()) return;
    // Outside the mutex (a callback may submit the stream's next push);
    // the joiner's end waits for them.
    ++telling_;
    lock.unlock();
    for (auto& told : on_done) told();
    lock.lock();
    --telling_;
    done_cv_.notify_all();
}

template <class Push>
void PushJoiner<Push>::run_one(std::unique_lock<std::mutex>& lock) {
    std::vector<Waiter*> batch;
    try {
        batch = take_batch();
    } catch (...) {
        // (Out of memory on the host:) every push waiting gets the error
        // rather than the process ending on the lane's thread.
        std::vector<OnDone> on_done = mark_done(waiting_, std::current_exception());
        waiting_.clear();
        done_cv_.notify_all();
        tell(lock, on_done);
        return;
    }
    run_batch(lock, batch);
}

// A stream's membership of one joiner's lane while its utterance is open:
// a stream enters at its first joined push (and again when its pushes move
// to another lane) and leaves at its flush, its reset and its end, so that
// the lane's batches wait only for streams that will push again soon.
template <class Push>
class JoinMembership {
  public:
    JoinMembership() = default;
    ~JoinMembership() { leave(); }
    JoinMembership(const JoinMembership&) = delete;
    JoinMembership& operator=(const JoinMembership&) = delete;

    // `push` of an open utterance through `joiner` (PushJoiner::push), as a
    // member of its lane from then on; `last` (the utterance's flush) leaves
    // it after, also when the batch failed.
    void push(PushJoiner<Push>& joiner, const Push& push,
              const typename PushJoiner<Push>::RunBatch& run, std::int64_t wait_until_ns,
              bool last) {
        enter(joiner);
        try {
            joiner.push(push, run, wait_until_ns);
        } catch (...) {
            if (last) leave();
            throw;
        }
        if (last) leave();
    }
    // A push of an open utterance goes to `joiner`.
    void enter(PushJoiner<Push>& joiner) {
        if (joiner_ == &joiner) return;
        leave();
        joiner.enter();
        joiner_ = &joiner;
    }
    void leave() {
        if (joiner_) joiner_->leave();
        joiner_ = nullptr;
    }

  private:
    PushJoiner<Push>* joiner_ = nullptr;
};

// Runs `run` for a batch of `size` pushes of several streams: any exception
// from it reaches each of them (through the joiner) as a device error of
// the same kind, gpu::OutOfMemory staying one so that the joiner halves its
// batches, its message naming the batch ("`network`: a batch of `size`
// `items` failed: ...", without the network where it is empty), so each
// stream's log says whose error it was; a batch of one rethrows as it is.
// Each stream then handles it as its own device error.
template <class Run>
void run_naming_the_batch(std::size_t size, std::string_view network, std::string_view items,
                          Run&& run) {
    const auto named = [&](const char* what) {
        std::string m = network.empty() ? std::string() : std::string(network) + ": ";
        return m + "a batch of " + std::to_string(size) + " " + std::string(items) +
               " failed: " + what;
    };
    try {
        run();
    } catch (const gpu::OutOfMemory& e) {
        if (size == 1) throw;
        throw gpu::OutOfMemory(named(e.what()));
    } catch (const gpu::DeviceError& e) {
        if (size == 1) throw;
        throw gpu::DeviceError(named(e.what()));
    } catch (const std::exception& e) {
        if (size == 1) throw;
        throw gpu::DeviceError(named(e.what()));
    }
}

// A network's batches in two lanes: live streams' pushes (Batching::Join)
// and offline readers' (JoinOffline), each with a joiner and the joint
// buffers its batches use, one batch of several streams at a time. Apart,
// neither waits for the other's batch to give the buffers back: the
// offline lane's thread runs below normal priority, as its readers do, and
// a live batch behind one of its batches would wait at that priority.
template <class Push>
struct JoinLane {
    explicit JoinLane(std::shared_ptr<DeviceLane> lane) : joiner(std::move(lane)) {}
    PushJoiner<Push> joiner;
    std::mutex mu;  // guards joint
    JointScratch joint;
};

template <class Push>
class JoinLanes {
  public:
    // On `device`'s lanes (DeviceLane::shared(): its backend's address),
    // beside its other networks' joiners.
    explicit JoinLanes(const void* device)
        : live_(DeviceLane::shared(device, 0)),
          offline_(DeviceLane::shared(device, rt::kOfflineNice)) {}
    // The lane of `kind` (Alone has none: the caller pushes at once).
    JoinLane<Push>& of(Batching kind) { return kind == Batching::JoinOffline ? offline_ : live_; }
    // Backend calls that ran two or more streams' layers, in both lanes.
    std::uint64_t batched_calls() {
        std::uint64_t calls = 0;
        for (JoinLane<Push>* lane : {&live_, &offline_}) {
            std::lock_guard lock(lane->mu);
            calls += lane->joint.batched_calls;
        }
        return calls;
    }

  private:
    JoinLane<Push> live_, offline_;
};

// What the lane's recordings left of a batch (replay_in_lane): its pushes
// that still run op by op, with their streams, which pushes replayed, and
// the lane's lock, held while two or more are left, as they share the
// lane's joint buffers.
template <class Push, class Stream>
struct LeftInLane {
    std::vector<Push> pushes;
    std::vector<Stream*> streams;
    std::vector<bool> replayed;  // one per push of the batch
    std::unique_lock<std::mutex> lock;
};

// The first part of a batch's run for every network whose streams share a
// lane's recordings (a decoder's, HifiGanStream::push_in_lane; a Piper
// flow's, VitsFlowStream::push_in_lane): a lone push of a stream without a
// slot goes through its own recordings (`push_recorded`); otherwise, under
// `lane_mu`, `replay_by_state()` runs each group of pushes in one state
// through the lane's (a lone push of a stream with a slot as a batch of
// one) and says which replayed. One push left runs op by op without the
// lock: a lone stream never uses the joint buffers op by op, so lone pushes
// outside the lanes (Batching::Alone) run side by side. `Stream` has `has_slot()` and
// `push_recorded(Push)`.
template <class Push, class Stream, class ReplayByState>
LeftInLane<Push, Stream> replay_in_lane(std::span<const Push> pushes,
                                        const std::vector<Stream*>& streams, std::mutex& lane_mu,
                                        ReplayByState&& replay_by_state) {
    LeftInLane<Push, Stream> left;
    const bool lone = pushes.size() == 1;
    if (lone && !streams[0]->has_slot() && streams[0]->push_recorded(pushes[0])) {
        left.replayed.assign(1, true);
        return left;
    }
    if (!lone || streams[0]->has_slot()) left.lock = std::unique_lock(lane_mu);
    left.replayed = left.lock.owns_lock() ? replay_by_state() : std::vector<bool>(pushes.size());
    for (std::size_t i = 0; i < pushes.size(); ++i)
        if (!left.replayed[i]) {
            left.pushes.push_back(pushes[i]);
            left.streams.push_back(streams[i]);
        }
    if (left.pushes.size() <= 1 && left.lock.owns_lock()) left.lock.unlock();
    return left;
}

}  // namespace etude::engine
