// etude bench: the engine's speed, time to first audio, capacity and
// memory, beside Flite's own synthesis of the same text on the same machine
// for a built-in voice.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/voice_options.h"
#include "engine/builtin_voices.h"
#include "engine/engine.h"
#include "server/speech_job.h"

extern char** environ;

namespace etude::cli {
namespace {

// 50 words.
constexpr const char* kParagraph =
    "The old lighthouse keeper climbed the narrow stairs every evening at dusk. He trimmed the "
    "wick, polished the great lens, and watched the ships move slowly past the rocks. In winter "
    "the storms were fierce, but the light never failed, and sailors spoke of him with quiet "
    "gratitude.";
// 20 words.
constexpr const char* kSentence =
    "Please remind me to call the dentist tomorrow morning at nine, and then book a table for "
    "dinner.";

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

double since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// Wall time of one run of the flite program, or a negative value if it is not there.
double time_flite_program(const std::string& voice, const std::string& text) {
    std::vector<std::string> argv_s{"flite", "-voice", voice, "-t", text, "-o", "/dev/null"};
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const auto t0 = Clock::now();
    pid_t pid;
    if (posix_spawnp(&pid, "flite", nullptr, nullptr, argv.data(), environ) != 0) return -1;
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return since(t0);
}

}  // namespace

int bench_command(int argc, char** argv) {
    return run_command("bench", [&] {
        CommandLine args(
            "etude bench [--voice VOICE] [--runs N]",
            "Measures, on this machine:\n"
            "  * synthesis speed of a 50-word paragraph as a multiple of real time, for\n"
            "    LibEtude (streaming engine, offline read) and, for a built-in voice,\n"
            "    Flite's library (same voice, in process) and the `flite` program (if\n"
            "    installed; includes start-up);\n"
            "  * time from push_text() of a 20-word sentence to its first audio sample;\n"
            "  * the capacity: how many real-time streams `etude serve` admits at once\n"
            "    with this voice, and the first audio it promises them: how soon the\n"
            "    last of that many replies started together is heard (it measures both\n"
            "    at start);\n"
            "  * peak resident memory of this process.\n"
            "Reports medians over the runs.");
        declare_voice_options(args, kVoiceOptionHelp);
        args.option("--runs", "N", "how many times to measure each figure (default 5)");
        args.footer("exit status: 0 measured, 1 runtime error, 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        const int runs = static_cast<int>(parse_number("--runs", args.value_or("--runs", "5")));
        if (runs < 1) throw UsageError("--runs must be at least 1");
        engine::StreamOptions opts;
        apply_voice_options(args, opts);
        opts.sample_rate = 0;  // the voice's own rate
        const bool builtin = std::holds_alternative<engine::BuiltinVoiceOptions>(opts.voice);
        const std::string voice_name = engine::voice_name(opts);

        engine::Engine engine(engine::Engine::Options{{builtin ? voice_name : "slt"}});
        // Flite's own synthesis with a built-in voice, the baseline: its rate.
        const double flite_rate =
            builtin ? engine::builtin_voice_vocoding(voice_name).sample_rate : 0.0;
        // Warm-up: first use pages in the voice data (and Flite's lexicon).
        {
            auto stream = engine.create_stream(opts);
            stream->push_text(kSentence);
            stream->end_input();
            std::vector<float> block(4096);
            while (stream->read(block) > 0) {
            }
        }
        if (builtin) engine::flite_reference_synthesis(voice_name, kParagraph);

        std::vector<double> ours, flite_lib, flite_prog, first_audio, cpu_ours, capacity_speed;
        std::vector<double> capacity_admitted;
        int capacity_streams = 0;
        engine::EngineCapacity last_capacity;
        // The capacity and the promise, measured as `etude serve` measures them.
        const engine::StreamOptions served = server::network_stream_options(opts);
        double audio_seconds = 0;
        std::vector<float> block(4096);
        for (int r = 0; r < runs; ++r) {
            {
                auto stream = engine.create_stream(opts);
                rusage ru0{}, ru1{};
                getrusage(RUSAGE_SELF, &ru0);
                const auto t0 = Clock::now();
                stream->push_text(kParagraph);
                stream->end_input();
                std::size_t total = 0, n;
                while ((n = stream->read(block)) > 0) total += n;
                const double wall = since(t0);
                getrusage(RUSAGE_SELF, &ru1);
                audio_seconds = static_cast<double>(total) / stream->sample_rate();
                ours.push_back(audio_seconds / wall);
                const double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                                   (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) * 1e-6 +
                                   (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                                   (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e-6;
                cpu_ours.push_back(audio_seconds / cpu);
            }
            if (builtin) {
                const auto t0 = Clock::now();
                const std::size_t n = engine::flite_reference_synthesis(voice_name, kParagraph);
                flite_lib.push_back(static_cast<double>(n) / flite_rate / since(t0));
                if (const double t = time_flite_program(voice_name, kParagraph); t > 0)
                    flite_prog.push_back(audio_seconds / t);
            }
            {
                auto stream = engine.create_stream(opts);
                float first[16];
                const auto t0 = Clock::now();
                stream->push_text(kSentence);
                stream->end_input();
                if (stream->read(first) > 0) first_audio.push_back(since(t0) * 1000.0);
                while (stream->read(block) > 0) {
                }
            }
            const engine::EngineCapacity c = engine.measure_capacity(served);
            capacity_speed.push_back(c.speed);
            capacity_admitted.push_back(static_cast<double>(c.streams));
            capacity_streams = c.streams_measured;
            last_capacity = c;
        }
        // The promise at that capacity.
        const double speed = median(capacity_speed);
        // On the CPU the figure follows from the speed; on a device it is
        // the smaller of the device's and the host's (the last run's parts
        // are shown beside it).
        const auto capacity = last_capacity.device.empty()
                                  ? engine::realtime_streams_at(speed)
                                  : static_cast<std::size_t>(median(capacity_admitted));
        const std::size_t admitted =
            std::min<std::size_t>(capacity, engine::Engine::kMostStartedTogether);
        std::vector<double> promised, promised_median;
        for (int r = 0; r < runs; ++r) {
            const engine::FirstAudioMeasure f =
                engine.measure_first_audio(served, static_cast<int>(admitted));
            promised.push_back(f.last_ms);
            promised_median.push_back(f.median_ms);
        }
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);

        std::printf("etude bench: voice %s, %d runs, %ld CPUs online, medians\n",
                    voice_name.c_str(), runs, sysconf(_SC_NPROCESSORS_ONLN));
        std::printf("| measure | value |\n|---|---|\n");
        std::printf("| paragraph (50 words) audio length | %.2f s |\n", audio_seconds);
        std::printf("| LibEtude speed (wall clock) | %.1fx real time |\n", median(ours));
        std::printf("| LibEtude speed (per CPU second, all threads) | %.1fx real time |\n",
                    median(cpu_ours));
        if (builtin) {
            std::printf("| Flite library, same voice, in process | %.1fx real time |\n",
                        median(flite_lib));
            if (!flite_prog.empty())
                std::printf("| `flite` program (incl. start-up) | %.1fx real time |\n",
                            median(flite_prog));
            else
                std::printf("| `flite` program | not installed |\n");
            std::printf("| LibEtude / Flite library | %.2fx |\n", median(ours) / median(flite_lib));
        }
        std::printf("| push_text -> first sample, 20-word sentence | %.1f ms |\n",
                    median(first_audio));
        if (last_capacity.device.empty()) {
            std::printf(
                "| capacity: real-time streams `etude serve` admits at once | %zu (%d streams of "
                "its reply at once speak %.1fx real time; a fifth kept free) |\n",
                capacity, capacity_streams, speed);
        } else {
            const auto& c = last_capacity;
            std::printf(
                "| capacity: real-time streams `etude serve` admits at once | %zu (the smaller of "
                "the device's %zu and the host's %zu; a fifth kept free) |\n",
                capacity, c.device_streams, c.host_streams);
            std::printf(
                "| the device's batch cost (%s) | %.3f ms a launch + %.0f ns a frame (batches of "
                "1-%d streams' %d-frame chunks and flow pushes timed) |\n",
                c.device.c_str(), static_cast<double>(c.launch_ns) * 1e-6, c.frame_ns,
                c.largest_batch_timed, c.chunk_frames);
            std::printf("| the host's text analysis, %d threads at once | %.1fx real time |\n",
                        c.streams_measured, c.host_speed);
        }
        if (!last_capacity.device_error.empty())
            std::printf("| the device, not measured (the CPU's figure used) | %s |\n",
                        last_capacity.device_error.c_str());
        std::printf(
            "| first audio promised: %zu replies started together, the last / the median | %.0f "
            "ms / %.0f ms |\n",
            admitted, median(promised), median(promised_median));
        std::printf("| peak resident memory (whole bench process) | %.1f MiB |\n",
                    static_cast<double>(ru.ru_maxrss) / 1024.0);
        return 0;
    });
}

}  // namespace etude::cli
