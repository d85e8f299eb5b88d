// Pushes of several streams of one network, made on their own threads (each
// stream's producer), run as one batch: a push that arrives while a batch
// runs waits for it and goes in the next one, with every other push that
// arrived meanwhile. Nothing waits for pushes to come: a push that finds no
// batch running runs at once, alone or with those already waiting. This is
// flat combining: the thread whose push starts a batch runs it for all of
// them.
//
// One joiner for every network that batches its streams, over the push it
// takes (`Push`: a decoder's chunk, StreamPush, vocoder_network.h, run by
// NetworkStream::push_together; a Piper flow's block, VitsFlowPush,
// vits/flow_stream.h; a Piper sentence's analysis, VitsAnalysisPush,
// vits/text_analysis_network.h). The joiner knows nothing of what a push
// holds.
//
// Worth it where one call for many streams is cheaper than one call each: a
// GPU (an H200 made 16 HiFi-GAN streams' 4-frame chunks twice as fast
// together, docs/benchmarks.md). On the CPU it is not: a batch would run on
// one producer's thread what the producers otherwise run side by side, and
// a chunk alone stays in cache from layer to layer.
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
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/models/stream_layers.h"
#include "engine/models/vocoder_network.h"
#include "gpu/backend.h"

namespace etude::engine {

struct JoinStats {
    std::uint64_t batches = 0;        // batches run
    std::uint64_t pushes = 0;         // pushes in them
    std::uint64_t largest = 0;        // pushes in the largest
    std::uint64_t cap = 0;            // the most a batch takes now; 0: no bound
    std::uint64_t out_of_memory = 0;  // batches that ran out of device memory
};

template <class Push>
class PushJoiner {
  public:
    using RunBatch = std::function<void(std::span<const Push>)>;

    // Runs `push` in a batch (through `run`, with the pushes waiting beside
    // it) and returns once it has run; rethrows the batch's exception.
    void push(const Push& push, const RunBatch& run);
    JoinStats stats() const {
        std::lock_guard lock(mu_);
        return stats_;
    }

    // For tests: while paused, pushes wait and no batch starts; resume()
    // lets the next one run every push waiting. waiting() counts them.
    void pause() {
        std::lock_guard lock(mu_);
        paused_ = true;
    }
    void resume() {
        {
            std::lock_guard lock(mu_);
            paused_ = false;
        }
        cv_.notify_all();
    }
    std::size_t waiting() const {
        std::lock_guard lock(mu_);
        return waiting_.size();
    }

  private:
    struct Waiter {
        Push push;
        bool done = false;
        std::exception_ptr error;
    };
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Waiter*> waiting_;  // in the order they came
    bool running_ = false, paused_ = false;
    JoinStats stats_;
};

template <class Push>
void PushJoiner<Push>::push(const Push& push, const RunBatch& run) {
    Waiter me{push};
    std::unique_lock lock(mu_);
    waiting_.push_back(&me);
    while (!me.done) {
        if (running_ || paused_) {
            cv_.wait(lock);
            continue;
        }
        // No batch runs: this thread runs one for the pushes waiting, the
        // first that came up to the cap (its own may be left for the next).
        running_ = true;
        const std::size_t take =
            stats_.cap ? std::min<std::size_t>(waiting_.size(), stats_.cap) : waiting_.size();
        std::vector<Waiter*> batch(waiting_.begin(),
                                   waiting_.begin() + static_cast<std::ptrdiff_t>(take));
        waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
        lock.unlock();
        std::exception_ptr error;
        bool out_of_memory = false;
        try {
            // (Inside the try: a push that failed here but left running_ set
            // would hang every push of the batch.)
            std::vector<Push> pushes;
            pushes.reserve(batch.size());
            for (const Waiter* w : batch) pushes.push_back(w->push);
            run(pushes);
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
        for (Waiter* w : batch) {
            w->done = true;
            w->error = error;
        }
        ++stats_.batches;
        stats_.pushes += batch.size();
        stats_.largest = std::max<std::uint64_t>(stats_.largest, batch.size());
        running_ = false;
        // The pushes of this batch return; of those that came meanwhile, the
        // first to wake runs the next batch.
        cv_.notify_all();
    }
    if (me.error) std::rethrow_exception(me.error);
}

// Runs `run` for a batch of `size` pushes of several streams: any exception
// from it reaches each of them (through the joiner) as a device error of
// the same kind, gpu::OutOfMemory staying one so that the joiner halves its
// batches, with the message `named(what)` gives (one that names the
// batch, so each stream's log says whose error it was); a batch of one
// rethrows as it is. Each stream then handles it as its own device error.
template <class Run, class Name>
void run_naming_the_batch(std::size_t size, Run&& run, Name&& named) {
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
// neither waits for the other's batch to give the buffers back: a batch
// led by an offline reader runs below normal priority, and a live batch
// behind it would wait at that priority.
template <class Push>
struct JoinLane {
    PushJoiner<Push> joiner;
    std::mutex mu;  // guards joint
    JointScratch joint;
};

template <class Push>
class JoinLanes {
  public:
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

}  // namespace etude::engine
