// Engine::measure_capacity() and Engine::measure_first_audio(): how many
// real-time streams this machine holds with a voice, and how soon each of
// that many streams started together is heard, both measured by speaking a
// typical reply on several streams at once. Where a Piper voice's decoder
// runs on a device, the capacity is the device's batch cost (its decoder's
// and flow's batches, measured: executor/batch_cost_fit.h) against the
// host's text analysis, timed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <random>
#include <thread>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/executor/batch_cost_fit.h"
#include "engine/models/batch_timing.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/voices/piper_stream_voice.h"
#include "engine/voices/piper_voice.h"
#include "gpu/host_compute.h"
#include "gpu/registry.h"

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

// Should a thread of a measurement fail to start, those started are let go
// before the error leaves: joined while waiting at the latch, they would
// wait for ever.
struct LetGo {
    std::latch& go;
    std::atomic<bool>& abandoned;
    bool armed = true;
    ~LetGo() {
        if (!armed) return;
        abandoned = true;
        go.count_down();
    }
};

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
        LetGo let_go{go, abandoned};
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

// ---- on a device -------------------------------------------------------------

// Batches timed of 1, 2, 4, ... streams' chunks (and flow pushes), up to
// this many: enough to see the launch shared (on an H200 a HiFi-GAN batch
// of 16 streams cost half of 16 alone), while the timing stays short on a
// slow device.
constexpr int kLargestBatchTimed = 32;
// Past this much time no larger batch is timed (two sizes are, at least):
// lavapipe, which runs the device's work on the host's cores, makes a
// medium voice's 32-stream batches in seconds.
constexpr std::int64_t kTimingBudgetNs = 1'000'000'000;
// The quickest of this many timed rounds per batch size: a round preempted
// by another process would price the device above its cost.
constexpr int kTimedRounds = 3;
// The device a Piper decoder of `options` runs on, as its streams open it
// (MelScheduler), or null: the CPU backend, or "cpu" asked for. Throws
// etude::Error for a backend or device that does not exist and
// gpu::DeviceError when it cannot be opened.
std::shared_ptr<gpu::Backend> decoder_device(const StreamOptions& options, std::string& where) {
    if (options.backend == "cpu") return nullptr;
    std::shared_ptr<gpu::Backend> backend;
    try {
        backend = open_model_backend(options.backend, options.device, &where);
    } catch (const std::invalid_argument& e) {
        throw Error(e.what());
    }
    return backend.get() == gpu::shared_cpu_backend().get() ? nullptr : backend;
}

// `timed`'s cost fitted, or with one size timed (a device that slow), all
// of its cost per frame, none shared, which is the least it can carry.
executor::BatchCost fitted(const std::vector<executor::TimedBatch>& timed) {
    if (timed.size() >= 2) return executor::fit_batch_cost(timed);
    return {0, static_cast<double>(timed[0].ns) / static_cast<double>(timed[0].frames)};
}

// The device's BatchCost for `voice`'s decoder and flow, both as the
// streams run them: at each batch size, the decoder's chunks and the flow's
// pushes timed through their batched paths (push_together, as their
// joiners run them), each fitted, and the two added per chunk. Sets c's
// chunk_frames and largest_batch_timed (the largest size both were timed
// at: the sum is not counted on past either fit).
executor::BatchCost measure_device_cost(const PiperVoice& voice, int speaker,
                                        const std::shared_ptr<gpu::Backend>& device,
                                        EngineCapacity& c) {
    const auto decoder = voice.load_decoder(speaker, device);
    const auto flow = voice.load_flow(speaker, device);
    const int frames = PiperStreamVoice::kMaxLatentChunkFrames;
    // The flow is pushed in blocks of this many frames, not chunks: a
    // chunk of the decoder's needs frames / flow_frames of a push.
    const int flow_frames = VitsFlowStream::kMinPush;
    const double unit_s = static_cast<double>(frames) * voice.hop() / voice.sample_rate();
    c.chunk_frames = frames;
    c.largest_batch_timed = 1;
    const auto t0 = Clock::now();
    std::vector<executor::TimedBatch> decoder_timed, flow_timed;
    for (int units = 1; units <= kLargestBatchTimed; units *= 2) {
        const auto d = time_joined_chunks(*decoder, units, frames, kTimedRounds, kTimingBudgetNs);
        decoder_timed.push_back({static_cast<std::int64_t>(units) * frames, d.ns});
        // A round longer than the whole budget: the device is priced by
        // what it has shown, and timed no further. The flow is timed at
        // the first size all the same, unless the decoder alone carries no
        // stream in real time (then none with the flow either, and the
        // flow, as slow there, would only make the answer seconds later).
        if (d.cut_short &&
            (!flow_timed.empty() ||
             executor::carried_streams(fitted(decoder_timed), frames, unit_s, kHeadroom, 1)
                     .streams == 0))
            break;
        const auto f = time_joined_flow(flow, units, flow_frames, kTimedRounds, kTimingBudgetNs);
        flow_timed.push_back({static_cast<std::int64_t>(units) * flow_frames, f.ns});
        c.largest_batch_timed = units;
        if (d.cut_short || f.cut_short) break;
        const auto spent = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0);
        if (flow_timed.size() >= 2 && spent.count() > kTimingBudgetNs) break;
    }
    const executor::BatchCost decoder_cost = fitted(decoder_timed);
    if (flow_timed.empty()) return decoder_cost;
    const executor::BatchCost flow_cost = fitted(flow_timed);
    return {decoder_cost.launch_ns + flow_cost.launch_ns * frames / flow_frames,
            decoder_cost.frame_ns + flow_cost.frame_ns};
}

// The host's part of a Piper stream with its decoder and flow on a device:
// each of `threads` threads analyses the reply (espeak-ng, the text
// encoder, the durations) and samples its prior, all at once, as that many
// streams starting together would. The speed in seconds of speech per
// second.
double host_analysis_speed(const PiperVoice& voice, const PiperVoiceOptions& piper, int threads) {
    const int speaker = voice.speaker_id(piper.speaker);
    const VitsScales scales = voice.scales(piper.noise_scale, piper.length_scale, piper.noise_w);
    const auto count = static_cast<std::size_t>(threads);
    std::vector<std::int64_t> frames(count, 0);
    std::vector<std::exception_ptr> errors(count);
    std::latch go(1);
    std::atomic<bool> abandoned{false};
    Clock::time_point t0;
    {
        std::vector<std::jthread> workers;
        workers.reserve(count);
        LetGo let_go{go, abandoned};
        for (std::size_t i = 0; i < count; ++i)
            workers.emplace_back([&, i] {
                try {
                    go.wait();
                    if (abandoned) return;
                    std::mt19937_64 noise(piper.seed + i);
                    for (const auto& sentence : voice.phonemize(kReply)) {
                        VitsPrior prior = voice.network().text_to_latent().prior(
                            sentence.ids.ids, speaker, scales, noise);
                        prior.sample_all();
                        frames[i] += prior.frames();
                    }
                } catch (...) {
                    errors[i] = std::current_exception();
                }
            });
        t0 = Clock::now();
        let_go.armed = false;
        go.count_down();
    }
    const double wall_s = std::max(std::chrono::duration<double>(Clock::now() - t0).count(), 1e-6);
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    std::int64_t all = 0;
    for (auto f : frames) all += f;
    if (all == 0) throw Error("the voice made no speech for the measurement");
    return static_cast<double>(all) * voice.hop() / voice.sample_rate() / wall_s;
}

// The device part of measure_capacity(): false, with c.device_error set,
// when the device failed (it is then left without the fault injected).
bool measure_on_device(const PiperVoice& voice, const PiperVoiceOptions& piper,
                       const std::shared_ptr<gpu::Backend>& device, const std::string& faults,
                       EngineCapacity& c) {
    // A device fault asked for (StreamOptions::faults, ETUDE_FAULT) applies
    // to the measurement as to a stream's work: how tests drill a device
    // that fails here.
    const FaultSpec spec = faults_for_stream(faults);
    if (spec.device) device->inject_fault(*spec.device);
    try {
        const executor::BatchCost cost =
            measure_device_cost(voice, voice.speaker_id(piper.speaker), device, c);
        c.launch_ns = cost.launch_ns;
        c.frame_ns = cost.frame_ns;
    } catch (const std::exception& e) {
        c.device_error = e.what();
    }
    if (spec.device) device->inject_fault({});
    if (c.device_error.empty()) return true;
    device->reset_health();
    c.device.clear();
    c.chunk_frames = c.largest_batch_timed = 0;
    return false;
}

}  // namespace

std::size_t realtime_streams_at(double speed) {
    return static_cast<std::size_t>(std::max(1.0, std::floor(speed * kHeadroom)));
}

EngineCapacity Engine::measure_capacity(const StreamOptions& options, int at_once) {
    check_process();
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
    StreamOptions spoken = options;
    if (const auto* piper = std::get_if<PiperVoiceOptions>(&options.voice)) {
        const auto voice = PiperVoice::open(piper->piper_voice);
        std::shared_ptr<gpu::Backend> device;
        try {
            device = decoder_device(options, c.device);
        } catch (const gpu::DeviceError& e) {
            c.device_error = e.what();
        }
        if (device && measure_on_device(*voice, *piper, device, options.faults, c)) {
            const double unit_s =
                static_cast<double>(c.chunk_frames) * voice->hop() / voice->sample_rate();
            const executor::BatchCost cost{c.launch_ns, c.frame_ns};
            // Batches no larger than the largest timed: a fit carried past
            // it would price a device far from full (its cost per frame
            // still hidden under the launch) as if it never filled.
            const auto carried = executor::carried_streams(cost, c.chunk_frames, unit_s, kHeadroom,
                                                           c.largest_batch_timed);
            c.batch_streams = carried.batch_units;
            c.device_streams = static_cast<std::size_t>(carried.streams);
            const double batch_s =
                static_cast<double>(cost.of(std::int64_t{carried.batch_units} * c.chunk_frames)) *
                1e-9;
            const double device_speed = carried.batch_units * unit_s / std::max(batch_s, 1e-9);
            c.host_speed = host_analysis_speed(*voice, *piper, n);
            c.host_streams = realtime_streams_at(c.host_speed);
            c.speed = std::min(device_speed, c.host_speed);
            c.streams = std::max<std::size_t>(1, std::min(c.device_streams, c.host_streams));
            return c;
        }
        // The device failed: the CPU's figure, which is what a stream whose
        // device fails falls back to.
        if (!c.device_error.empty()) spoken.backend = "cpu";
        c.device.clear();
    }
    c.speed = speak_together(*this, spoken, n, false).speed();
    c.streams = realtime_streams_at(c.speed);
    return c;
}

FirstAudioMeasure Engine::measure_first_audio(const StreamOptions& options, int streams) {
    check_process();
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
