#include "engine/scheduling/engine_workers.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "engine/streams/stream_core.h"
#include "gpu/host_compute.h"
#include "rt/realtime_thread.h"

namespace etude::engine {

EngineWorkers::EngineWorkers(int turns, int network_turns)
    : gate_(turns > 0 ? turns : default_turns(static_cast<unsigned>(gpu::host::usable_cpus())),
            kProcessorPriority),
      network_gate_(network_turns > 0 ? network_turns : std::max(2, gpu::host::usable_cpus()), 0,
                    /*solo_when_shared=*/true),
      // A turn per CPU, each holder on a CPU of its own: deadline_gate.h says why.
      offline_gate_(gpu::host::usable_cpus(), 0, /*solo_when_shared=*/true) {
    // The CPU backend's helpers are made now, by the thread that makes the
    // engine: made later by a producer that has stepped down (an offline
    // reader's), they would keep its nice value for good.
    gpu::host::start_workers();
    // The CPUs this process may use (its affinity: taskset, a container's
    // cpuset), not the host's: a container given 2 of 64 host threads must
    // not make a turn or a thread for each of the 64.
    const unsigned cores = static_cast<unsigned>(std::max(2, gpu::host::usable_cpus()));
    try {
        for (int i = 0; i < front_ends_for(gate_.turns(), cores); ++i)
            front_ends_.emplace_back([this] { run_front_end(); });
    } catch (...) {
        stop();  // the threads made so far, joined rather than left to terminate()
        throw;
    }
}

int EngineWorkers::front_ends_for(int turns, unsigned cores) {
    // A sentence's analysis waits for a turn like any other unit of work,
    // so one front end per turn is as many as can run; fewer would queue
    // every stream's encoder and durations behind one core while turns
    // stand free (docs/benchmarks.md, "Third GPU run": one front end against
    // several at 64 Piper streams). One turn is kept out of their
    // reach where there are two or more: an analysis cannot be stopped once
    // it holds its turn, and a started stream's urgent chunk must not wait
    // for the shortest of as many long encoders as there are turns.
    return std::clamp(turns - 1, 1, static_cast<int>(cores));
}

void EngineWorkers::add(const std::shared_ptr<StreamCore>& s) {
    std::lock_guard lock(mu_);
    // Render workers pre-vocode upcoming sentences on the other cores, for
    // the voices that render ahead (Flite's); made with the first such
    // stream. An engine of Piper voices has none.
    if (!s->renders_ahead() || !renderers_.empty() || stopping_) return;
    const unsigned cores = static_cast<unsigned>(std::max(2, gpu::host::usable_cpus()));
    for (unsigned i = 0; i + 1 < std::min(cores, 9u); ++i)
        renderers_.emplace_back([this] { run_renderer(); });
}

void EngineWorkers::wake(StreamCore& stream) {
    // A worker looks for work and then waits, both under mu_; the stream's
    // new work was published under the stream's own lock. Taking mu_ here
    // means the worker is either before its look (it will see the work) or
    // already waiting (it gets the notification): without it, a notification
    // sent between the look and the wait would be lost, and the sentence
    // would wait for the next wake() (a client's reply hangs meanwhile).
    {
        std::lock_guard lock(mu_);
        ++wakes_;
        // (No lock() of the stream here: the last reference dropped under
        // mu_ would join a producer that may be the thread calling this.)
        analysis_pending_.add(stream);
        if (stream.renders_ahead()) render_pending_.add(stream);
    }
    cv_.notify_all();
}

void EngineWorkers::stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        stopping_ = true;
        stopped_ = true;
    }
    wake_gates();
    cv_.notify_all();
    for (auto& t : front_ends_)
        if (t.joinable()) t.join();
    for (auto& t : renderers_)
        if (t.joinable()) t.join();
}

StepPool& EngineWorkers::network_steps() {
    std::lock_guard lock(steps_mu_);
    // At the network streams' priority (normal): their producers' was too.
    if (!network_steps_) network_steps_ = std::make_unique<StepPool>(network_gate_.turns());
    return *network_steps_;
}

StepPool& EngineWorkers::offline_steps() {
    std::lock_guard lock(steps_mu_);
    if (!offline_steps_)
        offline_steps_ = std::make_unique<StepPool>(offline_gate_.turns(), [](int) {
            rt::make_current_thread_background(rt::kOfflineNice);
        });
    return *offline_steps_;
}

bool EngineWorkers::stopping() {
    std::lock_guard lock(mu_);
    return stopping_;
}

std::pair<std::shared_ptr<StreamCore>, std::shared_ptr<AnalysedSentence>>
EngineWorkers::next_render() {
    std::vector<std::shared_ptr<StreamCore>> seen;  // released after mu_: see next_sentence()
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) return {};
        const std::uint64_t wakes = wakes_;
        std::shared_ptr<StreamCore> stream;
        std::shared_ptr<AnalysedSentence> job;
        using Found = PendingStreams<StreamCore>::Found;
        render_looks_ += render_pending_.look(
            [&](const std::shared_ptr<StreamCore>& s) {
                job = s->take_render_job();
                if (!job) return Found::Nothing;
                stream = s;
                return Found::Stop;
            },
            seen);
        if (job) {
            // It may have more; the other streams' come first.
            render_pending_.to_back(*stream);
            return {std::move(stream), std::move(job)};
        }
        release_and_wait(lock, seen, wakes);
    }
}

EngineWorkers::Analysis EngineWorkers::next_sentence() {
    // Before the lock, so released after it: the last reference to a stream
    // dropped here would join its producer, which may be waiting for mu_ in wake().
    std::vector<std::shared_ptr<StreamCore>> seen;
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) return {};
        std::uint64_t wakes = wakes_;
        std::shared_ptr<StreamCore> first;
        DeadlineGate::Due first_due;
        const std::int64_t now = DeadlineGate::now_ns();
        using Found = PendingStreams<StreamCore>::Found;
        front_end_looks_ += analysis_pending_.look(
            [&](const std::shared_ptr<StreamCore>& s) {
                const auto due = s->sentence_deadline();
                // Nothing to analyse until it wakes the workers again.
                if (!due) return Found::Nothing;
                // A one-at-a-time voice's sentence waits while another is
                // analysed rather than holding a turn while it waits for
                // the voice's lock. Ties go to the stream that woke the
                // workers first: the list's order.
                if (!(one_at_a_time_busy_ && s->analyses_one_at_a_time()) &&
                    (!first || due->before(first_due, now))) {
                    first = s;
                    first_due = *due;
                }
                return Found::Keep;
            },
            seen);
        const bool found = first != nullptr;
        // Still there unless a cancel came between the look and now.
        if (found)
            if (auto sentence = first->take_sentence()) {
                const bool one_at_a_time = first->analyses_one_at_a_time();
                one_at_a_time_busy_ = one_at_a_time_busy_ || one_at_a_time;
                return {std::move(first), std::move(sentence), first_due, one_at_a_time};
            }
        first.reset();
        if (found) wakes = wakes_ - 1;  // taken away meanwhile: look again at once
        release_and_wait(lock, seen, wakes);
    }
}

void EngineWorkers::begin_analysis() {
    std::lock_guard lock(mu_);
    most_analysing_ = std::max(most_analysing_, ++analysing_);
}

void EngineWorkers::end_analysis(bool one_at_a_time) {
    {
        std::lock_guard lock(mu_);
        --analysing_;
        if (one_at_a_time) one_at_a_time_busy_ = false;
        ++wakes_;  // a front end that passed over such a sentence looks again
    }
    cv_.notify_all();
}

int EngineWorkers::most_analyses_at_once() {
    std::lock_guard lock(mu_);
    return most_analysing_;
}

std::uint64_t EngineWorkers::front_end_looks() {
    std::lock_guard lock(mu_);
    return front_end_looks_;
}

std::uint64_t EngineWorkers::render_looks() {
    std::lock_guard lock(mu_);
    return render_looks_;
}

void EngineWorkers::release_and_wait(std::unique_lock<std::mutex>& lock,
                                     std::vector<std::shared_ptr<StreamCore>>& seen,
                                     std::uint64_t wakes) {
    // The streams looked at are let go without mu_ (see next_sentence());
    // a wake() meanwhile is not lost: wakes_ has moved on.
    lock.unlock();
    seen.clear();
    lock.lock();
    cv_.wait(lock, [&] { return stopping_ || wakes_ != wakes; });
}

void EngineWorkers::run_front_end() {
    for (;;) {
        Analysis a = next_sentence();
        if (!a.stream) return;
        {
            // The analysis in its turn among the producers' work, at their
            // priority (deadline_gate.h): as a normal thread it got only what
            // real-time producers left it, and new streams queued here.
            DeadlineGate::Turn turn =
                gate_.wait(a.due, [this] { return stopped_.load(std::memory_order_relaxed); });
            // An analysis outside the order (an offline reader's, a
            // server's) computes alone while offline or network work holds
            // turns: those holders compute alone, a core each, and loops
            // spread over the CPU workers beside them would only add a
            // helper spinning for its share while the holders have the
            // cores (2.9% of a 16-stream offline run's cycles).
            const gpu::host::SoloScope solo(
                turn.outside() && (offline_gate_.running() > 0 || network_gate_.running() > 0));
            begin_analysis();
            a.stream->analyse(std::move(*a.sentence));
        }
        end_analysis(a.one_at_a_time);
    }
}

void EngineWorkers::run_renderer() {
    // Rendering ahead is less urgent than the sentence being spoken, which
    // the streams' block schedulers produce: yield the CPU to them.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 5);
    for (;;) {
        auto [stream, sentence] = next_render();
        if (!stream) return;
        stream->render_ahead(sentence);
    }
}

}  // namespace etude::engine
