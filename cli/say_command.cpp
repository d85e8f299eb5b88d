// etude say: text in, speech out (WAV file, raw PCM on stdout, or speakers).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/portaudio_output.h"
#include "audio-io/wav_writer.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/text_input.h"
#include "gpu/registry.h"

namespace etude::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) {
    g_interrupted.store(true);
}

std::string read_all_stdin() {
    std::string text;
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
    return text;
}

class Progress {
  public:
    Progress(bool enabled, double rate) : enabled_(enabled), rate_(rate) {}
    void update(const engine::StreamStats& s, bool force = false) {
        if (!enabled_) return;
        const auto now = std::chrono::steady_clock::now();
        if (!force && now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        std::fprintf(stderr, "\r[etude] sentence %llu/%llu, %.1f s of audio ",
                     static_cast<unsigned long long>(s.sentences_spoken),
                     static_cast<unsigned long long>(s.sentences_queued),
                     static_cast<double>(s.samples_delivered) / rate_);
        shown_ = true;
    }
    void finish() {
        if (shown_) std::fputc('\n', stderr);
    }

  private:
    bool enabled_;
    double rate_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point last_{};
};

void print_stats(const engine::StreamStats& s, double rate) {
    std::fprintf(stderr,
                 "stats: %.2f s of audio, %llu sentences spoken, %llu dropped, %llu underruns "
                 "(%llu samples), first audio %.1f ms, front end %.3f s, vocoder %.3f s\n"
                 "  latency %.1f ms, blocks %llu (primary %llu, fallback %llu, ahead %llu), "
                 "fallbacks %llu, late %llu, reduced tier %llu\n",
                 static_cast<double>(s.samples_delivered) / rate,
                 static_cast<unsigned long long>(s.sentences_spoken),
                 static_cast<unsigned long long>(s.sentences_dropped),
                 static_cast<unsigned long long>(s.underruns),
                 static_cast<unsigned long long>(s.underrun_samples), s.first_audio_ms,
                 s.frontend_seconds, s.vocoder_seconds, s.latency_ms,
                 static_cast<unsigned long long>(s.blocks),
                 static_cast<unsigned long long>(s.blocks_primary),
                 static_cast<unsigned long long>(s.blocks_fallback),
                 static_cast<unsigned long long>(s.blocks_ahead),
                 static_cast<unsigned long long>(s.fallbacks),
                 static_cast<unsigned long long>(s.late_blocks),
                 static_cast<unsigned long long>(s.reduced_tier_blocks));
}

void print_gpu_stats(const engine::StreamStats& s, const engine::StreamOptions& o) {
    if (!s.gpu_device.empty()) {
        std::fprintf(
            stderr, "  spectral vocoder on %s: %llu GPU blocks, %llu device failures%s%s\n",
            s.gpu_device.c_str(), static_cast<unsigned long long>(s.blocks_gpu),
            static_cast<unsigned long long>(s.gpu_failures), s.gpu_disabled ? " (GPU now off)" : "",
            s.gpu_last_error.empty() ? "" : ("; last error: " + s.gpu_last_error).c_str());
        try {
            auto backend =
                gpu::DeviceRegistry::instance().open(gpu::with_environment({o.backend, o.device}));
            for (const auto& t : backend->kernel_timings())
                std::fprintf(stderr, "    %-18s %6llu calls, %8.3f ms total, %7.3f ms max\n",
                             t.name.c_str(), static_cast<unsigned long long>(t.calls), t.total_ms,
                             t.max_ms);
        } catch (const std::exception&) {
        }
    } else {
        std::fprintf(stderr, "  spectral vocoder on the CPU (%s)\n", s.gpu_note.c_str());
    }
}

bool write_raw(std::span<const float> samples) {
    static std::vector<short> pcm(8192);
    if (pcm.size() < samples.size()) pcm.resize(samples.size());
    audio_io::float_to_pcm16(samples, std::span(pcm).first(samples.size()));
    // 16-bit little-endian: the host order on every platform we build for.
    const std::size_t n = std::fwrite(pcm.data(), sizeof(short), samples.size(), stdout);
    return n == samples.size() && std::fflush(stdout) == 0;
}

int run_say(const CommandLine& args) {
    // ---- validate everything before any work -------------------------------
    std::string text;
    if (!args.positional().empty()) {
        for (const auto& w : args.positional()) text += (text.empty() ? "" : " ") + w;
    } else {
        text = read_all_stdin();
    }
    if (auto bad = engine::find_invalid_utf8(text))
        throw Error("text is not valid UTF-8 (bad byte at offset " + std::to_string(*bad) + ")");
    if (!engine::has_speakable_text(text))
        throw Error("no text to speak: the input is empty or only white space");

    engine::StreamOptions opts;
    opts.voice = args.value_or("--voice", "slt");
    if (auto l = args.value("--latency-ms")) opts.latency_ms = parse_number("--latency-ms", *l);
    opts.vocoder = args.value_or("--vocoder", "mlsa");
    if (opts.vocoder != "mlsa" && opts.vocoder != "spectral")
        throw UsageError("unknown vocoder '" + opts.vocoder + "' (choose mlsa or spectral)");
    opts.backend = args.value_or("--backend", "auto");
    if (auto d = args.value("--gpu-device"))
        opts.device = static_cast<int>(parse_number("--gpu-device", *d));
    try {
        gpu::parse_backend_request(opts.backend, opts.device);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (opts.vocoder == "spectral") {
        // Fail early and clearly on a device that does not exist.
        gpu::DeviceRegistry::instance().resolve(gpu::with_environment({opts.backend, opts.device}));
    }
    if (auto r = args.value("--rate")) opts.sample_rate = parse_number("--rate", *r);
    const auto out_path = args.value("-o") ? args.value("-o") : args.value("--output");
    const bool raw = args.flag("--raw");
    bool play = args.flag("--play");
    if (!out_path && !raw && !play) play = true;
    if (raw && isatty(STDOUT_FILENO))
        throw Error(
            "--raw writes binary audio to standard output, which is a terminal; "
            "redirect it or pipe it to a player");
    if (raw && play) throw UsageError("--raw and --play cannot be combined");
    if (args.flag("--float") && !out_path) throw UsageError("--float needs -o FILE");

    // Playing: find the device first, and without --rate synthesise at the
    // device's own rate (a JACK server, for one, accepts nothing else).
    std::optional<audio_io::PortAudioSystem> pa;
    int play_device = -1;
    if (play) {
        pa.emplace();
        play_device =
            pa->find_output_device(args.value_or("--device", ""), args.value_or("--host-api", ""));
        if (!args.value("--rate"))
            for (const auto& d : pa->output_devices())
                if (d.index == play_device && d.default_sample_rate >= 8000 &&
                    d.default_sample_rate <= 192000)
                    opts.sample_rate = d.default_sample_rate;
    }

    engine::Engine engine(engine::Engine::Options{{}});
    auto stream = engine.create_stream(opts);  // checks voice and rate
    const double rate = stream->sample_rate();

    std::optional<audio_io::WavWriter> wav;
    if (out_path)
        wav.emplace(
            *out_path, static_cast<int>(rate),
            args.flag("--float") ? audio_io::WavFormat::Float32 : audio_io::WavFormat::Pcm16);

    std::unique_ptr<audio_io::PortAudioOutput> player;
    std::unique_ptr<rt::SpscRing<float>> tap;
    if (play) {
        if (wav) tap = std::make_unique<rt::SpscRing<float>>(static_cast<std::size_t>(rate * 4));
        player =
            std::make_unique<audio_io::PortAudioOutput>(*pa, *stream, play_device, 256, tap.get());
    }

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGPIPE, SIG_IGN);

    Progress progress(
        !args.flag("-q") && !args.flag("--quiet") && isatty(STDERR_FILENO) && text.size() > 200,
        rate);
    stream->push_text(text);
    text.clear();
    text.shrink_to_fit();

    std::vector<float> block(4096);
    if (player) {
        player->start();
        while (!g_interrupted && stream->busy()) {
            if (tap) {
                std::size_t n;
                while ((n = tap->read(block)) > 0) wav->write(std::span(block).first(n));
            }
            progress.update(stream->stats());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        // Let the device play out what it has buffered.
        std::this_thread::sleep_for(
            std::chrono::duration<double>(player->output_latency_seconds() + 0.05));
        player->stop();
        if (tap) {
            std::size_t n;
            while ((n = tap->read(block)) > 0) wav->write(std::span(block).first(n));
            if (player->tap_overflows())
                throw Error("the WAV copy of the played audio overflowed; nothing was written");
        }
    } else {
        std::size_t n;
        while (!g_interrupted && (n = stream->read(block)) > 0) {
            const auto chunk = std::span<const float>(block).first(n);
            if (wav) wav->write(chunk);
            if (raw && !write_raw(chunk)) {
                progress.finish();
                throw Error("standard output was closed after " +
                            std::to_string(stream->stats().samples_delivered) +
                            " samples; stopping");
            }
            progress.update(stream->stats());
        }
    }
    progress.update(stream->stats(), true);
    progress.finish();
    if (g_interrupted) {
        stream->cancel();
        throw Error("interrupted; no output file written");
    }
    const auto stats = stream->stats();
    if (stats.samples_delivered == 0)
        throw Error("the text produced no speech (nothing Flite could pronounce)");
    if (wav) wav->commit();
    if (stats.sentences_unspeakable > 0)
        std::fprintf(
            stderr,
            "etude say: %llu sentence(s) had nothing Flite could pronounce and were skipped\n",
            static_cast<unsigned long long>(stats.sentences_unspeakable));
    if (auto trace = args.value("--trace")) stream->write_trace(*trace);
    if (args.flag("--stats")) {
        print_stats(stats, rate);
        if (stats.vocoder == "spectral") print_gpu_stats(stats, opts);
    }
    return 0;
}

}  // namespace

int say_command(int argc, char** argv) {
    return run_command("say", [&] {
        CommandLine args(
            "etude say [TEXT...] [options]",
            "Speaks TEXT (or standard input when no TEXT is given) with the embedded voice.\n"
            "Long text is split into sentences and streamed: audio starts after the first\n"
            "sentence, not after the whole text.");
        args.positionals("TEXT...", "the words to speak, joined with single spaces");
        args.group("output (choose any; with none of them, plays on the default audio device)")
            .option("-o,--output", "FILE",
                    "write a WAV file (16-bit PCM; --float for 32-bit float), atomically")
            .flag("--raw", "write 16-bit signed little-endian mono PCM to standard output")
            .flag("--play", "play through PortAudio while synthesising");
        args.group("options")
            .option("--voice", "NAME",
                    "slt (default, female US English), rms (male), awb (male, Scottish)")
            .option("--rate", "HZ",
                    "output sample rate, 8000-192000 (default: 16000, the voices' own; with "
                    "--play, the device's own rate)")
            .flag("--float", "with -o: write 32-bit float samples")
            .option("--device", "DEV",
                    "with --play: output device index or part of its name (default: the default "
                    "output; see 'etude devices')")
            .option("--host-api", "NAME",
                    "with --play: search only this PortAudio host API (part of its name, e.g. "
                    "ALSA, JACK); alone, its default device")
            .option("--latency-ms", "MS",
                    "the fixed latency budget the engine adds, 5-10000 (default 100)")
            .option("--vocoder", "NAME",
                    "mlsa (default: exact, CPU) or spectral (frame-parallel, runs on a GPU)")
            .option(
                "--backend", "NAME",
                "for --vocoder spectral: auto (default: a GPU if there is one), cpu, cuda, opencl")
            .option("--gpu-device", "N",
                    "index of the device within that backend (default: the best; see 'etude "
                    "devices')")
            .option("--trace", "FILE",
                    "write the scheduler's per-block trace (Chrome JSON, opens in Perfetto)")
            .flag("--stats", "print stream statistics to standard error at the end")
            .flag("-q,--quiet", "no progress line (shown on a terminal for text over 200 bytes)");
        args.footer(
            "exit status: 0 spoken, 1 runtime error (bad text, unwritable file, no device),\n"
            "2 usage error.\n"
            "\n"
            "examples:\n"
            "  etude say \"Hello world.\" -o hello.wav\n"
            "  etude say --voice rms --rate 48000 --play < chapter.txt\n"
            "  etude say --raw \"Piping speech.\" | aplay -f S16_LE -r 16000 -c 1\n");
        if (!args.parse(argc, argv)) return 0;
        return run_say(args);
    });
}

}  // namespace etude::cli
