// The engine's workers, shared by all its streams: one front-end thread
// analyses each stream's sentences (Flite's front end, a Piper voice's
// encoder and durations), taking the sentence with the earliest deadline
// of all streams (deadline.h: the order across streams), and render
// workers vocode built-in voices' sentences ahead of the one being spoken,
// taking work from the streams round-robin. Also keeps one GPU block processor per device, shared
// by the streams on it, so the device gets one batch of launches for all of them.
//
// Threads: add(), wake(), stop(), stopping() and shared_gpu_processor() from
// any thread; the workers take their stream's lock only through the
// StreamCore calls, never while holding it, and a stream calls wake() only
// after releasing its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/block_processor.h"
#include "engine/deadline_gate.h"
#include "engine/work_items.h"

namespace etude::engine {

class StreamCore;

class EngineWorkers {
  public:
    // `turns`: Engine::Options::work_turns (0: default_turns()).
    explicit EngineWorkers(int turns = 0);
    ~EngineWorkers() { stop(); }
    EngineWorkers(const EngineWorkers&) = delete;
    EngineWorkers& operator=(const EngineWorkers&) = delete;

    void add(const std::shared_ptr<StreamCore>& s);
    // A stream has work for the workers. Call it without the stream's lock.
    void wake();
    void stop();
    bool stopping();
    // The turns of the producers' neural work, earliest deadline first
    // across the streams (deadline_gate.h).
    DeadlineGate& gate() { return gate_; }

    // The GPU processor of a device, created by `make` on first use and
    // shared by the streams using that device while any of them lives.
    template <typename Make>
    std::shared_ptr<BlockProcessor> shared_gpu_processor(const std::string& device, Make make) {
        std::lock_guard lock(gpu_mu_);
        auto& weak = gpu_processors_[device];
        if (auto p = weak.lock()) return p;
        auto p = make();
        weak = p;
        return p;
    }

  private:
    // Finds work with `take` over the streams, round-robin; waits if none.
    template <typename Job, typename Take>
    std::pair<std::shared_ptr<StreamCore>, Job> next_job(Take take);
    // The sentence due first of all streams' (StreamCore::sentence_deadline());
    // waits if none.
    // `due`: when it is due.
    std::pair<std::shared_ptr<StreamCore>, std::optional<Sentence>> next_sentence(
        DeadlineGate::Due& due);
    // Lets `seen` go without mu_, then waits for a wake() after the look
    // that began when wakes_ was `wakes` (or for stop()).
    void release_and_wait(std::unique_lock<std::mutex>& lock,
                          std::vector<std::shared_ptr<StreamCore>>& seen, std::uint64_t wakes);
    void run_front_end();
    void run_renderer();

    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::atomic<bool> stopped_{false};  // stopping_, for the gate's give_up (no mu_ there)
    std::uint64_t wakes_ = 0;           // wake() calls: a look that began before one looks again
    std::list<std::weak_ptr<StreamCore>> streams_;
    std::size_t round_robin_ = 0;
    std::thread front_end_;
    std::vector<std::thread> renderers_;
    DeadlineGate gate_;
    std::mutex gpu_mu_;
    std::map<std::string, std::weak_ptr<BlockProcessor>> gpu_processors_;
};

}  // namespace etude::engine
