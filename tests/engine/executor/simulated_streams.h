// Streams and a clock for the device executor, simulated: each stream is
// the state machine the executor expects (a sentence's analysis, then its
// decoder chunks one after another, each continuing the last), each
// processor runs a batch in exactly the time its cost model says, and the
// clock jumps from one event to the next. So a thousand streams on a
// device run through the executor's real code in a fraction of a second
// on two cores, with the same result on every machine (no wall clock, no
// threads).
//
// A listener starts playing a stream when its first chunk is made and
// then plays in real time; a chunk made after the listener reached it is
// an underrun. Deadlines come from deadline.h, as the engine's do.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/executor/executor.h"
#include "engine/scheduling/deadline.h"

namespace etude::engine::executor::sim {

constexpr std::int64_t kMs = 1'000'000;

// A voice as the executor sees it: two networks (the analysis, run once per
// sentence, and the decoder, once per chunk) with their sizes.
struct SimVoice {
    std::uint32_t analysis_network = 1;
    std::int32_t analysis_frames = 8;
    std::uint32_t chunk_network = 2;
    std::int32_t chunk_frames = 22;  // mel frames: 22 at 22050/256 Hz
    double chunk_audio_s = 22 * 256 / 22050.0;
};

struct SimStream {
    std::int64_t push_ns = 0;  // when its sentence is pushed
    SimVoice voice;
    int chunks = 8;
    // The most audio made ahead of its listener: the ring it is written
    // into holds this much, so a chunk is ready only once the listener is
    // within it (a device far faster than real time does not run ahead).
    double ring_s = 1.0;
};

struct SimFaults {
    // The device is lost halfway through its batch of this number (0: the
    // first), so that batch's units are lost with it.
    int lose_processor_0_during_batch = -1;
    int processor_0_memory_units = INT_MAX;    // larger launches run out of memory
    std::uint64_t cancel_stream = UINT64_MAX;  // cancelled at cancel_at_ns
    std::int64_t cancel_at_ns = -1;
};

struct SimBatch {
    int processor = 0;
    std::size_t units = 0;
    bool one_network = true;
    std::int64_t start_ns = 0;
};

struct SimResult {
    std::vector<std::int64_t> first_audio_ns;  // per stream; -1: never heard
    std::vector<int> chunks_made;              // per stream
    std::vector<int> underruns;                // per stream
    std::vector<SimBatch> batches;
    int made_twice = 0;  // a unit completed for a stream that had none out
    int out_of_memory = 0;
    int unroutable = 0;              // submitted with every processor lost
    int chunks_after_loss_on_0 = 0;  // made by a lost device
    std::size_t lost_in_flight = 0;  // units the lost device was running
    std::int64_t lost_at_ns = -1;
    int total_underruns() const {
        int n = 0;
        for (int u : underruns) n += u;
        return n;
    }
    std::int64_t first_audio_percentile(double q) const {
        std::vector<std::int64_t> heard;
        for (auto t : first_audio_ns)
            if (t >= 0) heard.push_back(t);
        if (heard.empty()) return -1;
        std::sort(heard.begin(), heard.end());
        const auto i = static_cast<std::size_t>(q * static_cast<double>(heard.size() - 1) + 0.5);
        return heard[std::min(i, heard.size() - 1)];
    }
    double mean_batch(int processor) const {
        double units = 0, n = 0;
        for (const auto& b : batches)
            if (b.processor == processor) units += static_cast<double>(b.units), n += 1;
        return n > 0 ? units / n : 0.0;
    }
};

inline SimResult simulate(Executor& executor, const std::vector<SimStream>& streams,
                          const SimFaults& faults = {}) {
    struct State {
        int next = 0;  // 0: the analysis; k > 0: chunk k - 1
        bool outstanding = false;
        bool cancelled = false;
        std::int64_t listener_start_ns = 0;
    };
    struct Running {
        Executor::Launch launch;
        std::int64_t done_ns;
    };
    const std::size_t n = streams.size();
    SimResult r;
    r.first_audio_ns.assign(n, -1);
    r.chunks_made.assign(n, 0);
    r.underruns.assign(n, 0);
    std::vector<State> state(n);
    std::vector<Running> running;
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return streams[a].push_ns < streams[b].push_ns;
    });
    std::vector<std::pair<std::int64_t, std::size_t>> waiting;  // (ready at, stream)
    std::size_t started = 0;
    bool lost = false, cancelled = false;
    int device_batches = 0;
    std::int64_t lose_at = -1;
    std::int64_t now = 0;

    auto submit = [&](std::size_t s, std::int64_t t) {
        const auto& v = streams[s].voice;
        auto& st = state[s];
        WorkUnit u{s, 0, 0, {}};
        if (st.next == 0) {
            u.network = v.analysis_network;
            u.frames = v.analysis_frames;
            u.due = sentence_due({.started = false, .pushed_ns = streams[s].push_ns});
        } else {
            const int k = st.next - 1;
            u.network = v.chunk_network;
            u.frames = v.chunk_frames;
            u.due = k == 0 ? chunk_due({.started = false, .pushed_ns = streams[s].push_ns})
                           : chunk_due({.started = true,
                                        .listener_start_ns = st.listener_start_ns,
                                        .audio_s = k * v.chunk_audio_s});
        }
        st.outstanding = true;
        if (executor.submit(u, t) < 0) ++r.unroutable;
    };
    auto done = [&](const WorkUnit& u, int processor, std::int64_t t) {
        const std::size_t s = u.stream;
        auto& st = state[s];
        if (st.cancelled) return;
        if (!st.outstanding) {
            ++r.made_twice;
            return;
        }
        st.outstanding = false;
        if (st.next > 0) {
            const int k = st.next - 1;
            if (k == 0) {
                st.listener_start_ns = t;
                r.first_audio_ns[s] = t - streams[s].push_ns;
            } else if (t > st.listener_start_ns + static_cast<std::int64_t>(
                                                      k * streams[s].voice.chunk_audio_s * 1e9)) {
                ++r.underruns[s];
            }
            ++r.chunks_made[s];
            if (lost && processor == 0) ++r.chunks_after_loss_on_0;
        }
        if (++st.next > streams[s].chunks) return;
        const int k = st.next - 1;  // the chunk to make next
        const auto ready = st.listener_start_ns +
                           static_cast<std::int64_t>(
                               (k * streams[s].voice.chunk_audio_s - streams[s].ring_s) * 1e9);
        if (k > 0 && ready > t)
            waiting.emplace_back(ready, s);
        else
            submit(s, t);
    };

    for (;;) {
        while (started < n && streams[order[started]].push_ns <= now) submit(order[started++], now);
        std::erase_if(waiting, [&](const std::pair<std::int64_t, std::size_t>& w) {
            if (w.first > now) return false;
            if (!state[w.second].cancelled) submit(w.second, now);
            return true;
        });
        if (!lost && lose_at >= 0 && now >= lose_at) {
            lost = true;
            std::vector<WorkUnit> orphans;
            std::erase_if(running, [&](const Running& run) {
                if (run.launch.processor != 0) return false;
                orphans.insert(orphans.end(), run.launch.units.begin(), run.launch.units.end());
                return true;
            });
            r.lost_in_flight = orphans.size();
            r.lost_at_ns = now;
            executor.lose(0, orphans, now);
        }
        if (!cancelled && faults.cancel_at_ns >= 0 && now >= faults.cancel_at_ns) {
            cancelled = true;
            state[faults.cancel_stream].cancelled = true;
            executor.cancel(faults.cancel_stream);
        }
        for (bool again = true; again;) {
            again = false;
            for (auto& launch : executor.start_ready(now)) {
                if (launch.processor == 0 &&
                    static_cast<int>(launch.units.size()) > faults.processor_0_memory_units) {
                    ++r.out_of_memory;
                    executor.out_of_memory(0, launch.worker, launch.units);
                    again = true;
                    continue;
                }
                SimBatch b{launch.processor, launch.units.size(), true, now};
                for (const auto& u : launch.units)
                    b.one_network &= u.network == launch.units[0].network;
                r.batches.push_back(b);
                if (launch.processor == 0 &&
                    device_batches++ == faults.lose_processor_0_during_batch)
                    lose_at = now + launch.expected_ns / 2;
                const std::int64_t at = now + launch.expected_ns;
                running.push_back({std::move(launch), at});
            }
        }
        std::int64_t next = INT64_MAX;
        if (started < n) next = std::min(next, streams[order[started]].push_ns);
        for (const auto& run : running) next = std::min(next, run.done_ns);
        for (const auto& w : waiting) next = std::min(next, w.first);
        if (!lost && lose_at > now) next = std::min(next, lose_at);
        if (!cancelled && faults.cancel_at_ns > now) next = std::min(next, faults.cancel_at_ns);
        if (next == INT64_MAX) break;
        now = next;
        std::vector<Running> finished;
        std::erase_if(running, [&](Running& run) {
            if (run.done_ns != now) return false;
            finished.push_back(std::move(run));
            return true;
        });
        for (auto& run : finished) {
            executor.finished(run.launch.processor, run.launch.worker);
            for (const auto& u : run.launch.units) done(u, run.launch.processor, now);
        }
    }
    return r;
}

}  // namespace etude::engine::executor::sim
