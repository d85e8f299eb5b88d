// Engine::measure_capacity() and Engine::measure_first_audio(): how many
// real-time streams this machine holds with a voice, and how soon each of
// that many streams started together is heard, both measured by speaking a
// typical reply on several streams at once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "gpu/host_compute.h"

namespace etude::engine {
namespace {

using Clock = std::chrono::steady_clock;

// An assistant's typical reply (the one bench/many_clients.py sends).
constexpr const char* kReply =
    "The living room lights are off and the front door is locked. "
    "Tomorrow will be sunny with a light breeze.";

// Kept free: a stream's start (its first sentence's prior and the flow's
// look-ahead) costs more than its real-time share, and starts come in
// bursts. The deadline order (deadline.h) keeps started streams fed while
// new ones start, so a fifth is enough: with bench/many_clients.py
// (en_US-joe-medium, 2 vCPUs, 19-21x real time), 16 admitted at 32 clients
// let none of 96 listeners run dry (docs/benchmarks.md, "Network streams
// in the deadline order"). Before the order, two fifths were needed.
constexpr double kHeadroom = 0.8;

// The most streams the capacity measurement speaks at once: enough to fill
// a large machine's cores, few enough to take about a second there.
constexpr int kMostAtOnce = 32;

// What `n` streams that start together, each read as a server reads its
// client's (read_some(): audio handed on as it is made, no real-time
// workers), did.
struct SpokenTogether {
    double wall_s = 0;                  // from the start until all stopped
    double audio_s = 0;                 // all the streams' audio together
    std::vector<double> first_audio_s;  // each one's first audio, from the start
    double speed() const { return audio_s / wall_s; }
};

// How long a reader waits for audio before it looks whether all are heard.
constexpr int kReadWaitMs = 20;

// `until_all_heard`: every stream stops once each has been heard. What is
// spoken after the last first audio delays no first audio, and speaking
// it would make a server's start seconds longer.
SpokenTogether speak_together(Engine& engine, const StreamOptions& options, int n,
                              bool until_all_heard) {
    // Outside the engine's work turns, as a server's streams run
    // (server::network_stream_options() says the same): the answer is what
    // the CPUs hold, not what Options::work_turns allows.
    StreamOptions outside = options;
    outside.scheduling = SchedulingClass::Network;
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < n; ++i) streams.push_back(engine.create_stream(outside));
    const auto count = static_cast<std::size_t>(n);
    std::vector<std::size_t> samples(count, 0);
    std::vector<double> first(count, -1.0);
    std::vector<std::exception_ptr> errors(count);
    // All streams are created before any is pushed: a voice that loads on
    // first use would otherwise be timed in the first stream's start.
    std::latch go(1);
    std::atomic<bool> abandoned{false};
    std::atomic<int> heard{0};
    Clock::time_point t0;
    {
        std::vector<std::jthread> readers;
        readers.reserve(count);
        // Should a reader's thread fail to start, those started are let go
        // before the error leaves: joined while waiting at the latch, they
        // would wait for ever.
        struct LetGo {
            std::latch& go;
            std::atomic<bool>& abandoned;
            bool armed = true;
            ~LetGo() {
                if (!armed) return;
                abandoned = true;
                go.count_down();
            }
        } let_go{go, abandoned};
        for (int i = 0; i < n; ++i)
            readers.emplace_back([&, i] {
                const auto k = static_cast<std::size_t>(i);
                try {
                    go.wait();
                    if (abandoned) return;
                    Stream& s = *streams[k];
                    s.push_text(kReply);
                    s.end_input();
                    std::vector<float> block(4096);
                    for (;;) {
                        const std::size_t got = s.read_some(block, kReadWaitMs);
                        if (got > 0 && first[k] < 0) {
                            first[k] = std::chrono::duration<double>(Clock::now() - t0).count();
                            heard.fetch_add(1);
                        }
                        samples[k] += got;
                        if (until_all_heard && heard.load() == n) break;
                        // None came and none is on its way: all spoken.
                        if (got == 0 && !s.busy()) break;
                    }
                } catch (...) {
                    errors[k] = std::current_exception();
                }
            });
        t0 = Clock::now();
        let_go.armed = false;
        go.count_down();
    }
    SpokenTogether r;
    r.wall_s = std::max(std::chrono::duration<double>(Clock::now() - t0).count(), 1e-6);
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (std::size_t i = 0; i < count; ++i) {
        if (samples[i] == 0) throw Error("the voice made no audio for the measurement");
        r.audio_s += static_cast<double>(samples[i]) / streams[i]->sample_rate();
    }
    r.first_audio_s = std::move(first);
    return r;
}

}  // namespace

std::size_t realtime_streams_at(double speed) {
    return static_cast<std::size_t>(std::max(1.0, std::floor(speed * kHeadroom)));
}

EngineCapacity Engine::measure_capacity(const StreamOptions& options, int at_once) {
    if (at_once < 0 || at_once > kMostAtOnce)
        throw Error("measure_capacity: at_once must be from 0 to " + std::to_string(kMostAtOnce) +
                    ", not " + std::to_string(at_once));
    // One stream per usable CPU by default: a single stream does not fill
    // many cores (on 16 cores one Piper stream ran 24.5x real time and
    // sixteen together 75x), while on two cores one or two streams measure
    // the same.
    const int n = at_once > 0 ? at_once : std::clamp(gpu::host::usable_cpus(), 2, kMostAtOnce);
    EngineCapacity c;
    c.streams_measured = n;
    c.speed = speak_together(*this, options, n, false).speed();
    c.streams = realtime_streams_at(c.speed);
    return c;
}

FirstAudioMeasure Engine::measure_first_audio(const StreamOptions& options, int streams) {
    if (streams < 1 || streams > kMostStartedTogether)
        throw Error("measure_first_audio: streams must be from 1 to " +
                    std::to_string(kMostStartedTogether) + ", not " + std::to_string(streams));
    const SpokenTogether s = speak_together(*this, options, streams, true);
    std::vector<double> ms;
    for (double f : s.first_audio_s) ms.push_back(f * 1e3);
    std::sort(ms.begin(), ms.end());
    FirstAudioMeasure m;
    m.streams = streams;
    const std::size_t mid = ms.size() / 2;
    m.median_ms = ms.size() % 2 ? ms[mid] : (ms[mid - 1] + ms[mid]) / 2;
    m.last_ms = ms.back();
    return m;
}

}  // namespace etude::engine
