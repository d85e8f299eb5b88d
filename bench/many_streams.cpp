// Many streams of one voice in one engine, each pulled in real time as a
// JACK client would pull it: how soon each starts, whether any underruns,
// and how much speech the engine makes per second with all of them at once.
//
//   etude_many_streams --voice VOICE.onnx [--streams 1,2,4,8,16]
//                      [--rounds 3] [--period-ms 10] [--backend auto]
//                      [--ids-from FILE.json] [--beside-readers N] [--turns N]
//                      [--scheduling live|network|offline] [--offline-only] [--count-ops]
//                      [--precision fp32|tf32] [--join] [--speakers N]
//
// --turns N: Engine::Options::work_turns (default: the engine's own).
// --scheduling network: the streams are of the network class, as a
// server's are (their chunks at the network gate, deadline_gate.h);
// offline: of the offline class (its gate). Either, with a Piper voice on
// the CPU, is stepped by the engine's pool of its class with no thread of
// its own (engine/scheduling/step_pool.h); ETUDE_PRODUCERS=threads gives
// each a producer thread, for comparison.
// --offline-only: only the offline reads (the aggregate speed), no live
// rounds: what bench/onnx_sessions.py compares with ONNX Runtime.
// --count-ops: the streams' device counts the operations it is given
// (its profiling, which also times each one: the speeds are then not the
// figures to quote), printed per second of audio and per batch. Each
// operation is a launch the host pays for (a few microseconds on CUDA),
// so this says how much host time the device's work costs; and the six
// operations that took the most device time ("replay": a recorded decoder
// step replayed whole, its kernels not timed apart).
// --precision: Engine::Options::device_precision (tf32: CUDA's tensor
// cores for the GEMMs and convolutions).
// --join: the device's streams meet in batches even where it is not a GPU
// (lavapipe, PoCL: set_join_streams on its decoder, flow and text
// analysis), so that a machine without one counts a batch's operations
// (with ETUDE_FAULT=cpu-busy, which keeps the chunks on the device).
// --speakers N: stream i speaks as speaker i mod N of a voice of several
// (StreamOptions::speaker): its speakers' streams batch together on a
// device (models/shared_batching.h), as one speaker's do.
// --backend says where each stream's decoder runs (StreamOptions::backend:
// auto, cpu, cuda, vulkan, opencl). --ids-from FILE.json: instead of the
// reply's text, each stream speaks the "phoneme_ids" array of FILE three
// times over (three sentences), which needs no espeak-ng: how the GPU pack
// runs it on a machine without our packages (tests/data/piper/reference.json
// holds ids every test and full-size voice takes). --beside-readers N: N
// more streams of the voice read offline with read(), one reply after
// another, for as long as the live streams speak: whether a stream pulled
// in real time is fed beside work that has no deadline.
//
// For each count N, N streams get the same 20-word reply at the same moment,
// each from its own thread as a server's connections push theirs
// (push_text then end_input); that thread then calls pull() for one
// period's samples every period (the ring prebuffers and then plays, as
// for a live client). Per stream: first audio from the common moment (so
// a push that waits for another's espeak-ng counts its wait), underruns and padded silence (the
// engine's own counters, which count only inside speech). Then the same N streams read offline with
// read(): the aggregate speed, seconds of audio per second of wall time. Prints one line per N and
// the CPU; numbers belong to the machine they came from (docs/benchmarks.md).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "bench/host_cpu.h"
#include "engine/engine.h"
#include "engine/models/neural_model.h"
#include "engine/models/stream_joiner.h"
#include "engine/models/vits/flow_network.h"
#include "engine/models/vits/text_analysis_network.h"
#include "engine/voices/piper_voice.h"
#include "gpu/cpu/openblas_kernels.h"
#include "gpu/registry.h"
#include "tests/support/process_threads.h"

namespace {

using etude::bench::cpu_model;
using etude::bench::cpu_seconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kReply =
    "The living room lights are off and the front door is locked. "
    "Tomorrow will be sunny with a light breeze.";

double percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

// What each stream is given: the reply's text, or a sentence's phoneme ids
// pushed kIdSentences times.
struct Reply {
    std::vector<std::int64_t> ids;  // empty: the text
    void push(etude::engine::Stream& s) const {
        if (ids.empty())
            s.push_text(kReply);
        else
            for (int i = 0; i < kIdSentences; ++i) s.push_phoneme_ids(ids);
        s.end_input();
    }
    static constexpr int kIdSentences = 3;
};

// Where the streams' work ran, summed over them (StreamStats): a device
// that cannot keep up shows as chunks the CPU made, which on a GPU machine
// is host time the device should have spent.
struct WorkPlaces {
    std::uint64_t decoder_device = 0, decoder_cpu = 0, flow_device = 0, flow_cpu = 0,
                  analyses_device = 0, analyses_cpu = 0, device_errors = 0;
    std::string last_error;  // a stream's last device error, where one had any
    void add(const etude::engine::StreamStats& st) {
        add(WorkPlaces{st.mel_chunks_gpu, st.mel_chunks_cpu, st.flow_pushes_gpu, st.flow_pushes_cpu,
                       st.analyses_gpu, st.analyses_cpu, st.gpu_failures, st.gpu_last_error});
    }
    void add(const WorkPlaces& o) {
        decoder_device += o.decoder_device;
        decoder_cpu += o.decoder_cpu;
        flow_device += o.flow_device;
        flow_cpu += o.flow_cpu;
        analyses_device += o.analyses_device;
        analyses_cpu += o.analyses_cpu;
        device_errors += o.device_errors;
        if (!o.last_error.empty()) last_error = o.last_error;
    }
    // "decoder chunks 120 on the device, 3 on the CPU; ..."
    std::string describe() const {
        const auto u = [](std::uint64_t v) { return std::to_string(v); };
        return "decoder chunks " + u(decoder_device) + " on the device, " + u(decoder_cpu) +
               " on the CPU; flow pushes " + u(flow_device) + ", " + u(flow_cpu) + "; analyses " +
               u(analyses_device) + ", " + u(analyses_cpu) + "; device errors " + u(device_errors) +
               (last_error.empty() ? "" : " (the last: " + last_error + ")");
    }
};

struct LiveResult {
    std::vector<double> first_ms;
    std::uint64_t streams_with_underruns = 0, underrun_samples = 0;
    double audio_s = 0;  // all the streams' audio
    WorkPlaces places;
};

// `readers` offline readers, each reading the reply over and over until `stop`.
std::vector<std::thread> start_readers(etude::engine::Engine& engine,
                                       const etude::engine::StreamOptions& opts, const Reply& reply,
                                       int readers, std::atomic<bool>& stop) {
    std::vector<std::thread> threads;
    for (int i = 0; i < readers; ++i)
        threads.emplace_back([&] {
            std::vector<float> buf(4096);
            while (!stop.load()) {
                auto s = engine.create_stream(opts);
                reply.push(*s);
                while (!stop.load() && s->read(buf) > 0) {
                }
            }
        });
    return threads;
}

// Stream i's options: `opts`, with speaker i mod `speakers` where more than
// one (--speakers: streams of several speakers of one voice, which batch
// together on a device).
etude::engine::StreamOptions stream_options(const etude::engine::StreamOptions& opts, int i,
                                            int speakers) {
    etude::engine::StreamOptions mine = opts;
    if (auto* piper = std::get_if<etude::engine::PiperVoiceOptions>(&mine.voice);
        piper && speakers > 1)
        piper->speaker = std::to_string(i % speakers);
    return mine;
}

LiveResult live_round(etude::engine::Engine& engine, const etude::engine::StreamOptions& opts,
                      const Reply& reply, int n, double period_ms, int readers, int speakers) {
    std::atomic<bool> stop_readers{false};
    std::vector<std::thread> reader_threads =
        start_readers(engine, opts, reply, readers, stop_readers);
    if (readers > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // under way
    std::vector<std::unique_ptr<etude::engine::Stream>> streams;
    for (int i = 0; i < n; ++i)
        streams.push_back(engine.create_stream(stream_options(opts, i, speakers)));
    const double rate = streams[0]->sample_rate();
    const auto period = std::chrono::duration<double, std::milli>(period_ms);
    const std::size_t frames = static_cast<std::size_t>(rate * period_ms / 1000.0);
    std::atomic<bool> go{false};
    Clock::time_point start;
    std::vector<double> push_ms(static_cast<std::size_t>(n), 0.0);
    std::vector<std::thread> consumers;
    for (int i = 0; i < n; ++i) {
        consumers.emplace_back([&, i] {
            std::vector<float> buf(frames);
            while (!go.load()) std::this_thread::yield();
            // First audio counts from the push (StreamStats), which may
            // begin after the common start: that wait is added.
            push_ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            reply.push(*streams[i]);
            auto next = Clock::now();
            // Until the stream has spoken everything and nothing is queued.
            for (int idle = 0; idle < 20;) {
                streams[i]->pull(buf);
                idle = streams[i]->busy() ? 0 : idle + 1;
                next += std::chrono::duration_cast<Clock::duration>(period);
                std::this_thread::sleep_until(next);
            }
        });
    }
    start = Clock::now();
    go = true;
    for (auto& t : consumers) t.join();
    stop_readers = true;
    for (auto& t : reader_threads) t.join();
    LiveResult r;
    for (std::size_t i = 0; i < streams.size(); ++i) {
        const auto st = streams[i]->stats();
        r.first_ms.push_back(st.first_audio_ms < 0 ? st.first_audio_ms
                                                   : push_ms[i] + st.first_audio_ms);
        r.streams_with_underruns += st.underruns > 0;
        r.underrun_samples += st.underrun_samples;
        r.audio_s += static_cast<double>(st.samples_delivered) / streams[i]->sample_rate();
        r.places.add(st);
    }
    return r;
}

struct OfflineResult {
    double audio_s = 0, wall_s = 0, cpu_s = 0;
    // The process's threads once its streams were made, before their
    // readers: what the engine holds for them (a producer each, or the
    // step pool's few: engine/scheduling/step_pool.h).
    int threads = 0;
    std::string gpu_device;  // where the first stream's decoder ran (StreamStats)
    WorkPlaces places;
    double speed() const { return audio_s / wall_s; }
};

OfflineResult offline_speed(etude::engine::Engine& engine, const etude::engine::StreamOptions& opts,
                            const Reply& reply, int n, int speakers = 1) {
    std::vector<std::unique_ptr<etude::engine::Stream>> streams;
    for (int i = 0; i < n; ++i)
        streams.push_back(engine.create_stream(stream_options(opts, i, speakers)));
    const double rate = streams[0]->sample_rate();
    const int threads = etude::test::threads_of_this_process();
    std::vector<std::size_t> samples(static_cast<std::size_t>(n));
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    std::vector<std::thread> readers;
    for (int i = 0; i < n; ++i) {
        readers.emplace_back([&, i] {
            reply.push(*streams[i]);
            std::vector<float> buf(4096);
            for (std::size_t got; (got = streams[i]->read(buf)) > 0;) samples[i] += got;
        });
    }
    for (auto& t : readers) t.join();
    OfflineResult r;
    r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpu_s = cpu_seconds() - cpu0;
    r.threads = threads;
    for (auto s : samples) r.audio_s += static_cast<double>(s) / rate;
    r.gpu_device = streams[0]->stats().gpu_device;
    for (const auto& s : streams) r.places.add(s->stats());
    return r;
}

// The batches on the streams' device (engine/models/stream_joiner.h): how
// many pushes each batch took, the flow's, the decoder's and the text
// analysis's (its pushes are sentences), the live streams' and the offline
// readers' (Batching), over one count's rounds.
// What a GPU run needs to tell a device kept busy from one fed a stream at
// a time.
class DeviceBatches {
  public:
    // The flow, decoder and text analysis of speaker 0 of `voice` on the
    // device `device` names (a stream's StreamStats::gpu_device): the
    // voice's shared ones, which the streams there run. Nothing printed
    // without one.
    DeviceBatches(const std::string& voice, const std::string& device) {
        if (device.empty()) return;
        auto& reg = etude::gpu::DeviceRegistry::instance();
        for (const auto& d : reg.devices()) {
            // (`device` describes it: its name with the backend and why.)
            if (device.find(d.name) == std::string::npos || d.kind == etude::gpu::BackendKind::Cpu)
                continue;
            const auto backend = reg.open({etude::gpu::to_string(d.kind), d.index});
            backend_ = backend;
            voice_ = etude::engine::PiperVoice::open(voice);
            decoder_ = voice_->load_decoder(0, backend);
            try {
                flow_ = voice_->load_flow(0, backend);
            } catch (const std::exception&) {
                // (the streams' flows then ran on the CPU)
            }
            try {
                analysis_ = voice_->load_analysis(backend);
            } catch (const std::exception&) {
                // (the streams' sentences then were analysed on the host)
            }
            name_ = device;
            break;
        }
    }
    void start() {
        if (!decoder_) return;
        before_ = now();
        ops_before_ = ops();
        timings_before_.clear();
        if (backend_)
            for (auto& t : backend_->kernel_timings()) timings_before_[t.name] = t;
    }
    // --count-ops: the device counts its operations from now on.
    void count_ops() {
        if (!decoder_) return;
        counting_ = true;
        etude::gpu::DeviceRegistry::instance().set_profiling(true);
    }
    // --join: the device's flow, decoder and text analysis batch their
    // streams' pushes.
    void join() {
        if (!decoder_) return;
        decoder_->set_join_streams(true);
        if (flow_) flow_->set_join_streams(true);
        if (analysis_) analysis_->set_join_streams(true);
    }
    // The operations per second of `audio_s` and per batch since start().
    void print_ops(double audio_s) const {
        if (!decoder_ || !counting_) return;
        const auto after = now();
        std::uint64_t batches = 0;
        for (std::size_t k = 0; k < after.size(); ++k)
            batches += after[k].batches - before_[k].batches;
        const double n = static_cast<double>(ops() - ops_before_);
        std::printf(
            "               device operations: %.0f per second of audio, %.0f per batch "
            "(%llu batches)\n",
            audio_s > 0 ? n / audio_s : 0.0, batches ? n / static_cast<double>(batches) : 0.0,
            static_cast<unsigned long long>(batches));
        print_device_time();
    }
    void print() const {
        if (!decoder_) return;
        const auto after = now();
        std::printf("               batches on %s:", name_.c_str());
        const char* what[] = {"flow live",       "flow offline",  "decoder live",
                              "decoder offline", "analysis live", "analysis offline"};
        static_assert(std::size(what) == kJoiners);
        for (std::size_t k = 0; k < after.size(); ++k) {
            const auto batches = after[k].batches - before_[k].batches;
            const auto pushes = after[k].pushes - before_[k].pushes;
            // Batches whose leader waited for the lane's members, and how
            // long on average; those that held every member.
            const auto waited = after[k].waited - before_[k].waited;
            const auto all = after[k].all_members - before_[k].all_members;
            const double wait_ms =
                waited ? static_cast<double>(after[k].waited_ns - before_[k].waited_ns) / 1e6 /
                             static_cast<double>(waited)
                       : 0.0;
            std::printf(" %s %llu of %.1f (largest so far %llu, %llu waited %.1f ms, %llu whole)%s",
                        what[k], static_cast<unsigned long long>(batches),
                        batches ? static_cast<double>(pushes) / static_cast<double>(batches) : 0.0,
                        static_cast<unsigned long long>(after[k].largest),
                        static_cast<unsigned long long>(waited), wait_ms,
                        static_cast<unsigned long long>(all), k + 1 < after.size() ? ";" : "\n");
        }
    }

  private:
    // Where the device's time went since start(): the operations that took
    // the most of it (each timed on the device, as profiling does), so that
    // a run shows which kernel to work on.
    void print_device_time() const {
        std::vector<etude::gpu::KernelTiming> spent;
        double total_ms = 0;
        for (auto t : backend_->kernel_timings()) {
            if (const auto b = timings_before_.find(t.name); b != timings_before_.end()) {
                t.calls -= b->second.calls;
                t.total_ms -= b->second.total_ms;
            }
            if (t.calls == 0) continue;
            total_ms += t.total_ms;
            spent.push_back(t);
        }
        if (total_ms <= 0) return;  // a backend that does not time its operations
        std::sort(spent.begin(), spent.end(),
                  [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
        std::printf("               device time %.0f ms, most in:", total_ms);
        for (std::size_t i = 0; i < std::min<std::size_t>(spent.size(), 6); ++i)
            std::printf("%s %s %.0f%% (%llu calls)", i ? ";" : "", spent[i].name.c_str(),
                        100.0 * spent[i].total_ms / total_ms,
                        static_cast<unsigned long long>(spent[i].calls));
        std::printf("\n");
    }
    // Every operation the device was given while profiling: its kernels,
    // copies and replays (kernel_timings()'s calls).
    std::uint64_t ops() const {
        std::uint64_t n = 0;
        if (backend_)
            for (const auto& t : backend_->kernel_timings()) n += t.calls;
        return n;
    }
    // The flow's, the decoder's and the analysis's joiners, live and
    // offline each (print()'s order).
    static constexpr std::size_t kJoiners = 6;
    std::array<etude::engine::JoinStats, kJoiners> now() const {
        std::array<etude::engine::JoinStats, kJoiners> s{};
        const etude::engine::Batching kinds[] = {etude::engine::Batching::Join,
                                                 etude::engine::Batching::JoinOffline};
        for (std::size_t k = 0; k < 2; ++k) {
            if (flow_)
                if (auto* j = flow_->joiner(kinds[k])) s[k] = j->stats();
            if (auto* j = decoder_->joiner(kinds[k])) s[2 + k] = j->stats();
            if (analysis_)
                if (auto* j = analysis_->joiner(kinds[k])) s[4 + k] = j->stats();
        }
        return s;
    }
    std::shared_ptr<const etude::engine::PiperVoice> voice_;
    std::shared_ptr<etude::engine::NeuralModel> decoder_;
    std::shared_ptr<const etude::engine::VitsFlowNetwork> flow_;
    std::shared_ptr<const etude::engine::VitsAnalysisNetwork> analysis_;
    std::shared_ptr<etude::gpu::Backend> backend_;
    std::string name_;
    std::array<etude::engine::JoinStats, kJoiners> before_{};
    std::uint64_t ops_before_ = 0;
    std::map<std::string, etude::gpu::KernelTiming> timings_before_;
    bool counting_ = false;
};

int usage() {
    std::fprintf(stderr,
                 "usage: etude_many_streams --voice VOICE.onnx [--streams 1,2,4,8,16] "
                 "[--rounds 3] [--period-ms 10] [--backend auto] [--ids-from FILE.json] "
                 "[--beside-readers N] [--turns N] [--scheduling live|network|offline] "
                 "[--offline-only] [--count-ops] [--precision fp32|tf32] [--join] "
                 "[--speakers N]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string voice, counts = "1,2,4,8,16", backend = "auto", ids_from;
    int rounds = 3, readers = 0, turns = 0, speakers = 1;
    std::string scheduling = "live", precision = "fp32";
    double period_ms = 10.0;
    bool offline_only = false, count_ops = false, join = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--offline-only" || a == "--count-ops" || a == "--join") {
            (a == "--count-ops" ? count_ops : a == "--join" ? join : offline_only) = true;
            continue;
        }
        if (i + 1 >= argc) return usage();
        if (a == "--voice")
            voice = argv[++i];
        else if (a == "--streams")
            counts = argv[++i];
        else if (a == "--rounds")
            rounds = std::atoi(argv[++i]);
        else if (a == "--period-ms")
            period_ms = std::atof(argv[++i]);
        else if (a == "--backend")
            backend = argv[++i];
        else if (a == "--ids-from")
            ids_from = argv[++i];
        else if (a == "--beside-readers")
            readers = std::atoi(argv[++i]);
        else if (a == "--turns")
            turns = std::atoi(argv[++i]);
        else if (a == "--scheduling")
            scheduling = argv[++i];
        else if (a == "--precision")
            precision = argv[++i];
        else if (a == "--speakers")
            speakers = std::atoi(argv[++i]);
        else
            return usage();
    }
    if (voice.empty() || rounds < 1 || period_ms <= 0 || readers < 0 || turns < 0 || speakers < 1 ||
        (scheduling != "live" && scheduling != "network" && scheduling != "offline"))
        return usage();
    try {
        etude::engine::Engine::Options engine_options;
        engine_options.work_turns = turns;
        engine_options.device_precision = etude::engine::parse_device_precision(precision);
        etude::engine::Engine engine(engine_options);
        etude::engine::StreamOptions opts;
        opts.voice = etude::engine::PiperVoiceOptions{.piper_voice = voice};
        opts.sample_rate = 0;
        opts.backend = backend;
        if (scheduling == "network") opts.scheduling = etude::engine::SchedulingClass::Network;
        if (scheduling == "offline") opts.scheduling = etude::engine::SchedulingClass::Offline;
        Reply reply;
        if (!ids_from.empty()) {
            std::ifstream in(ids_from);
            if (!in) throw std::runtime_error("cannot read " + ids_from);
            reply.ids =
                nlohmann::json::parse(in).at("phoneme_ids").get<std::vector<std::int64_t>>();
        }
        // Warm-up: the voice loads on first use. Its stream says which
        // device the streams' decoders run on.
        DeviceBatches device_batches(voice, offline_speed(engine, opts, reply, 1).gpu_device);
        if (count_ops) device_batches.count_ops();
        if (join) device_batches.join();
        // The other speakers' networks, made from speaker 0's (so joining
        // as it does), before any count is timed.
        if (speakers > 1) offline_speed(engine, opts, reply, speakers, speakers);
        std::printf(
            "%s, %u CPUs, OpenBLAS's %s kernels; %s on %s; %s; pulls of %.0f ms; %d rounds; "
            "%d offline readers beside; %d work turns%s\n",
            cpu_model().c_str(), std::thread::hardware_concurrency(),
            etude::gpu::cpu::openblas_kernels().c_str(), voice.c_str(), backend.c_str(),
            reply.ids.empty() ? "the reply's text"
                              : "3 sentences of phoneme ids from the --ids-from file",
            period_ms, rounds, readers, engine.stats().work_turns,
            turns > 0 ? "" : " (the default)");
        for (std::size_t pos = 0; pos < counts.size();) {
            const std::size_t comma = std::min(counts.find(',', pos), counts.size());
            const int n = std::atoi(counts.substr(pos, comma - pos).c_str());
            pos = comma + 1;
            if (n < 1) return usage();
            LiveResult all;
            std::vector<double> speeds;
            double live_cpu = 0, live_wall = 0, live_audio = 0;
            double offline_cpu = 0, offline_wall = 0, offline_audio = 0;
            int most_threads = 0;
            WorkPlaces live_places, offline_places;
            device_batches.start();
            for (int r = 0; r < rounds; ++r) {
                if (!offline_only) {
                    const double cpu0 = cpu_seconds();
                    const auto t0 = Clock::now();
                    const LiveResult one =
                        live_round(engine, opts, reply, n, period_ms, readers, speakers);
                    live_cpu += cpu_seconds() - cpu0;
                    live_wall += std::chrono::duration<double>(Clock::now() - t0).count();
                    all.first_ms.insert(all.first_ms.end(), one.first_ms.begin(),
                                        one.first_ms.end());
                    all.streams_with_underruns += one.streams_with_underruns;
                    all.underrun_samples += one.underrun_samples;
                    live_audio += one.audio_s;
                    live_places.add(one.places);
                }
                const OfflineResult off = offline_speed(engine, opts, reply, n, speakers);
                speeds.push_back(off.speed());
                offline_cpu += off.cpu_s;
                offline_wall += off.wall_s;
                offline_audio += off.audio_s;
                offline_places.add(off.places);
                most_threads = std::max(most_threads, off.threads);
            }
            const double cpus = std::thread::hardware_concurrency();
            if (offline_only) {
                std::printf(
                    "  %3d streams  offline %5.1fx real time; host CPU busy %3.0f%% of %u CPUs; "
                    "audio per CPU second %.1f s; %d threads with the streams made\n",
                    n, percentile(speeds, 0.5), 100.0 * offline_cpu / offline_wall / cpus,
                    std::thread::hardware_concurrency(), offline_audio / offline_cpu, most_threads);
                std::printf("               work offline: %s\n", offline_places.describe().c_str());
                device_batches.print();
                device_batches.print_ops(offline_audio);
                std::fflush(stdout);
                continue;
            }
            std::printf(
                "  %3d streams  first audio median %7.1f ms  p95 %7.1f  max %7.1f  "
                "underruns %llu/%zu streams (%llu samples)  offline %5.1fx real time\n",
                n, percentile(all.first_ms, 0.5), percentile(all.first_ms, 0.95),
                *std::max_element(all.first_ms.begin(), all.first_ms.end()),
                static_cast<unsigned long long>(all.streams_with_underruns), all.first_ms.size(),
                static_cast<unsigned long long>(all.underrun_samples), percentile(speeds, 0.5));
            // The host's share: this process's CPU time over the wall time
            // and the CPUs (a GPU run's host cost); and offline, the audio
            // made per CPU second, which other processes on a shared machine
            // change less than the wall-time speed.
            std::printf(
                "               host CPU busy: live %3.0f%%, offline %3.0f%% of %u CPUs; audio per "
                "CPU second: live %.1f s, offline %.1f s\n",
                100.0 * live_cpu / live_wall / cpus, 100.0 * offline_cpu / offline_wall / cpus,
                std::thread::hardware_concurrency(), live_audio / live_cpu,
                offline_audio / offline_cpu);
            std::printf(
                "               front ends: %d threads, at most %d sentences analysed at once so "
                "far\n",
                engine.stats().front_end_threads, engine.stats().most_analyses_at_once);
            std::printf("               work live: %s\n               work offline: %s\n",
                        live_places.describe().c_str(), offline_places.describe().c_str());
            device_batches.print();
            device_batches.print_ops(live_audio + offline_audio);
            std::fflush(stdout);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "etude_many_streams: %s\n", e.what());
        return 1;
    }
    return 0;
}
