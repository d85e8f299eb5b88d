// The engine's workers, shared by all its streams: front-end threads, one
// fewer than the order across streams has turns (deadline_gate.h; at least
// one, front_ends_for() says why), analyse the
// streams' sentences (Flite's front end, a Piper voice's encoder and
// durations), each taking the sentence with the earliest deadline of all
// streams (deadline.h: the order across streams); a stream's own sentences
// are analysed one at a time, in order, and a voice whose front end has
// process-wide state (Flite's) one at a time across all streams. Render
// workers, made with the first stream whose voice renders ahead, vocode
// built-in voices' sentences ahead of the one being spoken, taking work
// from the streams round-robin. Both kinds look only at the streams that
// woke them (pending_streams.h). Also keeps one GPU block processor per
// device, shared by the streams on it, so the device gets one batch of
// launches for all of them.
//
// Threads: add(), wake(), stop(), stopping() and shared_gpu_processor() from
// any thread; the workers take their stream's lock only through the
// StreamCore calls, never while holding it, and a stream calls wake() only
// after releasing its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/scheduling/block_processor.h"
#include "engine/scheduling/deadline_gate.h"
#include "engine/scheduling/pending_streams.h"
#include "engine/scheduling/step_pool.h"
#include "engine/streams/work_items.h"

namespace etude::engine {

class StreamCore;

class EngineWorkers {
  public:
    // `turns`: Engine::Options::work_turns (0: default_turns()).
    // `network_turns`: Engine::Options::network_turns (0: the usable CPUs,
    // at least 2).
    explicit EngineWorkers(int turns = 0, int network_turns = 0);
    ~EngineWorkers() { stop(); }
    EngineWorkers(const EngineWorkers&) = delete;
    EngineWorkers& operator=(const EngineWorkers&) = delete;

    void add(const std::shared_ptr<StreamCore>& s);
    // `stream` may have work for the workers: a sentence to analyse now, or
    // one to render ahead. Call it without the stream's lock, after every
    // change that can make StreamCore::sentence_deadline() say a sentence
    // is ready: the front ends look only at the streams that called it
    // since they last found nothing there.
    void wake(StreamCore& stream);
    void stop();
    bool stopping();
    // The turns of the producers' neural work, earliest deadline first
    // across the streams (deadline_gate.h).
    DeadlineGate& gate() { return gate_; }
    // The turns of network streams' decoder chunks (deadline_gate.h): the
    // same order, a turn per usable CPU, holders at their own priority,
    // each computing alone on a CPU of its own while others hold turns.
    DeadlineGate& network_gate() { return network_gate_; }
    // The turns of offline work (an offline stream's, an offline reader's):
    // a turn per usable CPU, holders at their own priority, each computing
    // alone on a CPU of its own while others hold turns (deadline_gate.h).
    DeadlineGate& offline_gate() { return offline_gate_; }
    // Wakes the waiters of every gate (a stream was cancelled or closed).
    void wake_gates() {
        gate_.wake_all();
        network_gate_.wake_all();
        offline_gate_.wake_all();
    }
    // The threads that step network streams' producers (step_pool.h), as
    // many as the network gate has turns, and offline streams', as many as
    // the offline gate has, below the live streams' priority (as an offline
    // producer steps down: rt::kOfflineNice). Each made with the first such
    // stream and kept until the engine's workers end (a server's streams
    // come and go; the threads stay).
    StepPool& network_steps();
    StepPool& offline_steps();
    // How many front-end threads there are, and the most sentences they
    // have analysed at once since the engine began (those of live streams
    // each in its turn; an offline reader's and a server's take none).
    int front_end_threads() const { return static_cast<int>(front_ends_.size()); }
    int most_analyses_at_once();
    // How often the front ends have looked at a stream for a sentence
    // (EngineStats::front_end_looks), and the render workers for a
    // sentence to render ahead (EngineStats::render_looks).
    std::uint64_t front_end_looks();
    std::uint64_t render_looks();

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

    // The front-end threads for `turns` turns on `cores` usable CPUs.
    static int front_ends_for(int turns, unsigned cores);

  private:
    // A sentence to render ahead, from the streams that woke the render
    // workers, round-robin; waits if none.
    std::pair<std::shared_ptr<StreamCore>, std::shared_ptr<AnalysedSentence>> next_render();
    // A sentence taken for analysis.
    struct Analysis {
        std::shared_ptr<StreamCore> stream;  // null: the workers are stopping
        std::optional<Sentence> sentence;
        DeadlineGate::Due due;       // when it is due
        bool one_at_a_time = false;  // StreamVoice::analyses_one_at_a_time()
    };
    // The sentence due first of all streams' (StreamCore::sentence_deadline())
    // that may be analysed now; waits if none.
    Analysis next_sentence();
    // Counts an analysis that has its turn (begin) or is done (end: its
    // one-at-a-time voice's next sentence may then be taken).
    void begin_analysis();
    void end_analysis(bool one_at_a_time);
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
    // The streams that woke the workers since the front ends (or the render
    // workers) last found nothing there (mu_): what they look through, so
    // that a look costs the streams with work, not every stream of the
    // engine. Only streams whose voice renders ahead wake the render workers.
    PendingStreams<StreamCore> analysis_pending_;
    PendingStreams<StreamCore> render_pending_;
    std::uint64_t front_end_looks_ = 0, render_looks_ = 0;
    std::vector<std::thread> front_ends_;
    int analysing_ = 0, most_analysing_ = 0;  // analyses holding their turns (mu_)
    bool one_at_a_time_busy_ = false;         // such a voice's sentence is taken (mu_)
    std::vector<std::thread> renderers_;  // made by add() with the first stream that renders ahead
    DeadlineGate gate_;
    DeadlineGate network_gate_;
    DeadlineGate offline_gate_;
    std::mutex gpu_mu_;
    std::map<std::string, std::weak_ptr<BlockProcessor>> gpu_processors_;
    std::mutex steps_mu_;
    // Last: its threads end before the rest goes (no stream is left by then).
    std::unique_ptr<StepPool> network_steps_, offline_steps_;
};

}  // namespace etude::engine
