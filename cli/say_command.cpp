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
#include <variant>
#include <vector>

#include "audio-io/portaudio_output.h"
#include "audio-io/wav_writer.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/mark_timings.h"
#include "cli/voice_options.h"
#include "engine/block_records.h"
#include "engine/engine.h"
#include "engine/piper/json_input.h"
#include "engine/piper/phoneme_ids.h"
#include "engine/piper/voice_catalog.h"
#include "engine/piper/voice_config.h"
#include "engine/text_input.h"
#include "engine/utf8.h"
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

// A run of --json-input lines with another speaker is a stream of its own:
// its counters add to the runs' before it (the first run keeps its first
// audio; the rest, the latency and devices, are the last run's).
void add_run(engine::StreamStats& total, const engine::StreamStats& run, bool first) {
    if (first) {
        total = run;
        return;
    }
    const double first_audio_ms = total.first_audio_ms;
    engine::StreamStats sum = run;
    sum.first_audio_ms = first_audio_ms;
    sum.samples_delivered += total.samples_delivered;
    sum.underruns += total.underruns;
    sum.underrun_samples += total.underrun_samples;
    sum.sentences_queued += total.sentences_queued;
    sum.sentences_spoken += total.sentences_spoken;
    sum.sentences_dropped += total.sentences_dropped;
    sum.sentences_unspeakable += total.sentences_unspeakable;
    if (sum.unspeakable_reason.empty()) sum.unspeakable_reason = total.unspeakable_reason;
    sum.frames_vocoded += total.frames_vocoded;
    sum.frontend_seconds += total.frontend_seconds;
    sum.vocoder_seconds += total.vocoder_seconds;
    sum.blocks += total.blocks;
    sum.blocks_primary += total.blocks_primary;
    sum.blocks_fallback += total.blocks_fallback;
    sum.blocks_ahead += total.blocks_ahead;
    sum.fallbacks += total.fallbacks;
    sum.late_blocks += total.late_blocks;
    sum.reduced_tier_blocks += total.reduced_tier_blocks;
    sum.blocks_gpu += total.blocks_gpu;
    sum.gpu_failures += total.gpu_failures;
    sum.mel_chunks_gpu += total.mel_chunks_gpu;
    sum.mel_chunks_cpu += total.mel_chunks_cpu;
    sum.mel_chunks_phase += total.mel_chunks_phase;
    total = std::move(sum);
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

// A Piper voice's decoder: which tier made its chunks, and on which device.
void print_decoder_stats(const engine::StreamStats& s) {
    if (s.gpu_device.empty())
        std::fprintf(stderr, "  decoder: %llu chunks on the CPU (%s)\n",
                     static_cast<unsigned long long>(s.mel_chunks_cpu),
                     s.gpu_note.empty() ? "no GPU tier" : s.gpu_note.c_str());
    else
        std::fprintf(
            stderr, "  decoder: %llu chunks on %s, %llu on the CPU, %llu device failures%s%s\n",
            static_cast<unsigned long long>(s.mel_chunks_gpu), s.gpu_device.c_str(),
            static_cast<unsigned long long>(s.mel_chunks_cpu),
            static_cast<unsigned long long>(s.gpu_failures), s.gpu_disabled ? " (GPU now off)" : "",
            s.gpu_last_error.empty() ? "" : ("; last error: " + s.gpu_last_error).c_str());
}

bool write_raw(std::span<const float> samples) {
    static std::vector<short> pcm(8192);
    if (pcm.size() < samples.size()) pcm.resize(samples.size());
    audio_io::float_to_pcm16(samples, std::span(pcm).first(samples.size()));
    // 16-bit little-endian: the host order on every platform we build for.
    const std::size_t n = std::fwrite(pcm.data(), sizeof(short), samples.size(), stdout);
    return n == samples.size() && std::fflush(stdout) == 0;
}

// What one stream speaks: a Piper speaker's run of --json-input lines, or
// all the text.
struct Utterances {
    using PhonemeIds = std::vector<std::int64_t>;
    std::string speaker;  // Piper streams: as --speaker takes it; "" the default
    std::vector<std::variant<std::string, PhonemeIds>> items;  // text or ids, in order
    bool ssml = false;  // the text items are SSML documents (--ssml)
};

// How StreamOptions::speaker names speaker `id`: by its name where the
// voice names it (a number could be another speaker's name), else by number.
std::string speaker_name(const piper::VoiceConfig& voice, int id) {
    for (const auto& [name, i] : voice.speaker_id_map)
        if (i == id) return name;
    return std::to_string(id);
}

// Piper's --json-input: one JSON object per line; consecutive lines with
// the same speaker share a stream (a Piper stream speaks with one speaker).
std::vector<Utterances> read_json_input(const std::string& input,
                                        const engine::StreamOptions& opts) {
    const auto voice = piper::read_voice_config(piper::require_voice(opts.piper_voice).config_path);
    const int fallback =
        opts.speaker.empty() ? voice.default_speaker_id : voice.speaker_id(opts.speaker);
    std::vector<Utterances> runs;
    std::size_t number = 0, begin = 0;
    while (begin < input.size()) {
        std::size_t end = input.find('\n', begin);
        if (end == std::string::npos) end = input.size();
        const std::string_view line(input.data() + begin, end - begin);
        begin = end + 1;
        ++number;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const auto parsed = piper::parse_json_input_line(line, "stdin:" + std::to_string(number));
        const std::string speaker =
            speaker_name(voice, piper::speaker_for(parsed, voice, fallback));
        if (runs.empty() || runs.back().speaker != speaker) runs.push_back({speaker, {}});
        auto& items = runs.back().items;
        if (parsed.phoneme_ids) {
            piper::check_phoneme_ids(*parsed.phoneme_ids, voice);
            items.emplace_back(*parsed.phoneme_ids);
        } else {
            items.emplace_back(parsed.text.value_or(""));
        }
    }
    if (runs.empty()) throw Error("no text to speak: standard input holds no JSON lines");
    return runs;
}

std::size_t push(engine::Stream& stream, const Utterances& u) {
    std::size_t sentences = 0;
    for (const auto& item : u.items) {
        if (const auto* ids = std::get_if<Utterances::PhonemeIds>(&item)) {
            stream.push_phoneme_ids(*ids);
            ++sentences;
        } else {
            const auto& text = std::get<std::string>(item);
            sentences += u.ssml ? stream.push_ssml(text) : stream.push_text(text);
            sentences += stream.end_input();  // each item is a whole utterance
        }
    }
    return sentences;
}

int run_say(const CommandLine& args) {
    // ---- validate everything before any work -------------------------------
    engine::StreamOptions opts;
    apply_voice_options(args, opts);
    const bool piper = !opts.piper_voice.empty();
    const bool json_input = args.flag("--json-input");
    if (json_input && !piper) throw UsageError("--json-input needs a Piper voice (--voice)");
    if (json_input && !args.positional().empty())
        throw UsageError("--json-input reads standard input; give no TEXT");
    const bool ssml = args.flag("--ssml");
    if (ssml && json_input) throw UsageError("--ssml and --json-input cannot be combined");
    std::string text;
    if (!args.positional().empty()) {
        for (const auto& w : args.positional()) text += (text.empty() ? "" : " ") + w;
    } else {
        text = read_all_stdin();
    }
    if (auto bad = utf8::find_bad_sequence(text))
        throw Error("text is not valid UTF-8 (" + utf8::describe(*bad) + ")");
    std::vector<Utterances> runs;
    if (json_input) {
        runs = read_json_input(text, opts);
    } else {
        if (!engine::has_speakable_text(text))
            throw Error("no text to speak: the input is empty or only white space");
        runs.push_back({opts.speaker, {std::move(text)}, ssml});
    }
    text.clear();
    text.shrink_to_fit();

    if (auto l = args.value("--latency-ms")) opts.latency_ms = parse_number("--latency-ms", *l);
    opts.vocoder = args.value_or("--vocoder", "mlsa");
    if (opts.vocoder != "mlsa" && opts.vocoder != "spectral")
        throw UsageError("unknown vocoder '" + opts.vocoder + "' (choose mlsa or spectral)");
    if (piper && opts.vocoder != "mlsa")
        throw UsageError("--vocoder applies to the built-in voices; a Piper voice has its own");
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
        const auto request = gpu::with_environment({opts.backend, opts.device});
        gpu::DeviceRegistry::instance().resolve(request);
        // A device named explicitly makes the blocks from the first one, so
        // wait for it to be ready (as etude jack does); otherwise a short
        // text is over before a cold device has built its state, and the
        // named device never shows at work.
        opts.wait_for_device = request.kind != "auto" || request.device >= 0;
    }
    // Without --rate: the voice's own rate.
    if (piper) opts.sample_rate = 0;
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
    if (play && runs.size() > 1)
        throw UsageError("--play speaks with one speaker; these JSON lines ask for " +
                         std::to_string(runs.size()) + " runs of different speakers");

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

    // A Piper voice is read once and kept for every run of speakers.
    engine::Engine::Options engine_options;
    engine_options.preload_voices.clear();
    if (piper) engine_options.preload_voices.push_back(opts.piper_voice);
    engine_options.preload_backend = opts.backend;
    engine_options.preload_device = opts.device;
    engine::Engine engine(engine_options);
    opts.speaker = runs.front().speaker;
    auto stream = engine.create_stream(opts);  // checks voice and rate
    const double rate = stream->sample_rate();

    std::optional<audio_io::WavWriter> wav;
    if (out_path)
        wav.emplace(
            *out_path, static_cast<int>(rate),
            args.flag("--float") ? audio_io::WavFormat::Float32 : audio_io::WavFormat::Pcm16);
    if (auto trace = args.value("--trace")) engine::check_trace_path(*trace);
    std::optional<MarkTimings> timings;
    if (auto t = args.value("--timings")) {
        timings.emplace(*t);
        stream->report_words(true);
    }

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

    std::size_t input_bytes = 0;
    for (const auto& run : runs)
        for (const auto& item : run.items)
            if (const auto* t = std::get_if<std::string>(&item)) input_bytes += t->size();
    Progress progress(
        !args.flag("-q") && !args.flag("--quiet") && isatty(STDERR_FILENO) && input_bytes > 200,
        rate);

    std::vector<float> block(4096);
    std::uint64_t delivered = 0, unspeakable = 0;
    std::string refusal;  // why the voice's network refused a sentence, if it did
    engine::StreamStats stats;
    if (player) {
        push(*stream, runs.front());
        player->start();
        while (!g_interrupted && stream->busy()) {
            if (tap) {
                std::size_t n;
                while ((n = tap->read(block)) > 0) wav->write(std::span(block).first(n));
            }
            if (timings) timings->drain(*stream, rate, 0);
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
        stats = stream->stats();
        delivered = stats.samples_delivered;
        unspeakable = stats.sentences_unspeakable;
        if (!stats.unspeakable_reason.empty()) refusal = stats.unspeakable_reason;
    } else {
        for (std::size_t r = 0; r < runs.size() && !g_interrupted; ++r) {
            if (r > 0) {  // the next speaker's lines: a stream of its own
                opts.speaker = runs[r].speaker;
                stream.reset();
                stream = engine.create_stream(opts);
                if (args.value("--timings")) stream->report_words(true);
            }
            push(*stream, runs[r]);
            const std::uint64_t offset = r > 0 ? stats.samples_delivered : 0;
            // Raw audio usually goes to a player (`| aplay`): read it as a
            // live consumer (read_some), which keeps the stream's real-time
            // priority and its turns across streams; a WAV file is an
            // offline render (read), which steps down (docs/tuning.md).
            const auto next = [&]() -> std::size_t {
                if (!raw) return stream->read(block);
                for (;;) {
                    const std::size_t got = stream->read_some(block, 200);
                    if (got > 0 || !stream->busy() || g_interrupted) return got;
                }
            };
            std::size_t n;
            while (!g_interrupted && (n = next()) > 0) {
                const auto chunk = std::span<const float>(block).first(n);
                if (wav) wav->write(chunk);
                if (raw && !write_raw(chunk)) {
                    progress.finish();
                    throw Error("standard output was closed after " +
                                std::to_string((r > 0 ? stats.samples_delivered : 0) +
                                               stream->stats().samples_delivered) +
                                " samples; stopping");
                }
                if (timings) timings->drain(*stream, rate, offset);
                progress.update(stream->stats());
            }
            if (timings) timings->drain(*stream, rate, offset);
            add_run(stats, stream->stats(), r == 0);
        }
        delivered = stats.samples_delivered;
        unspeakable = stats.sentences_unspeakable;
        refusal = stats.unspeakable_reason;
    }
    progress.update(stream->stats(), true);
    progress.finish();
    if (g_interrupted) {
        stream->cancel();
        throw Error("interrupted; no output file written");
    }
    const char* front_end = piper ? "the voice" : "Flite";
    // A sentence the voice's network refused says why (the last such
    // reason), not that there was nothing to pronounce.
    if (delivered == 0)
        throw Error(refusal.empty() ? std::string("the text produced no speech (nothing ") +
                                          front_end + " could pronounce)"
                                    : "the text produced no speech: " + refusal);
    if (timings) {
        timings->drain(*stream, rate, 0);
        timings->finish();
    }
    if (wav) wav->commit();
    if (unspeakable > 0 && refusal.empty())
        std::fprintf(
            stderr, "etude say: %llu sentence(s) had nothing %s could pronounce and were skipped\n",
            static_cast<unsigned long long>(unspeakable), front_end);
    else if (unspeakable > 0)
        std::fprintf(stderr, "etude say: %llu sentence(s) were refused and skipped (last: %s)\n",
                     static_cast<unsigned long long>(unspeakable), refusal.c_str());
    if (auto trace = args.value("--trace")) stream->write_trace(*trace);
    if (args.flag("--stats")) {
        print_stats(stats, rate);
        if (stats.vocoder == "spectral") print_gpu_stats(stats, opts);
        if (stats.vocoder == "vits") print_decoder_stats(stats);
    }
    return 0;
}

}  // namespace

int say_command(int argc, char** argv) {
    return run_command("say", [&] {
        CommandLine args(
            "etude say [TEXT...] [options]",
            "Speaks TEXT (or standard input when no TEXT is given) with a built-in voice or\n"
            "a Piper voice.\n"
            "Long text is split into sentences and streamed: audio starts after the first\n"
            "sentence, not after the whole text.");
        args.positionals("TEXT...", "the words to speak, joined with single spaces");
        args.group("output (choose any; with none of them, plays on the default audio device)")
            .option("-o,--output", "FILE",
                    "write a WAV file (16-bit PCM; --float for 32-bit float), atomically; "
                    "past WAV's 4 GiB, an RF64 file")
            .flag("--raw", "write 16-bit signed little-endian mono PCM to standard output")
            .flag("--play", "play through PortAudio while synthesising");
        args.group("voice");
        declare_voice_options(args, kVoiceOptionHelp);
        args.flag("--json-input",
                  "Piper voices: standard input is Piper's JSON lines, {\"text\": ...} or "
                  "{\"phoneme_ids\": [...]}, each with an optional \"speaker\" or \"speaker_id\"");
        args.group("options")
            .option("--rate", "HZ",
                    "output sample rate, 8000-192000 (default: the voice's own, 16000 for the "
                    "built-in voices; with --play, the device's own rate)")
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
            .option("--backend", "NAME",
                    "for --vocoder spectral and Piper voices: auto (default: a GPU if there is "
                    "one), cpu, cuda, vulkan, opencl")
            .option("--gpu-device", "N",
                    "index of the device within that backend (default: the best; see 'etude "
                    "devices')")
            .flag(
                "--ssml",
                "the text is an SSML document: <speak>, <mark name=\"...\"/>, "
                "<break time=\"500ms\"/>, <say-as interpret-as=\"characters\">, <prosody "
                "rate= pitch= range= volume=>; other elements keep their text; not well-formed XML "
                "is read as text")
            .option("--timings", "FILE",
                    "write each word's start and each SSML mark, one JSON line each: "
                    "{\"type\":\"word\" or \"mark\",\"name\":...,\"sample\":N,"
                    "\"seconds\":S}")
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
            "  etude say --voice en_US-joe-medium --seed 7 \"A natural voice.\" -o joe.wav\n"
            "  etude say --raw \"Piping speech.\" | aplay -f S16_LE -r 16000 -c 1\n");
        if (!args.parse(argc, argv)) return 0;
        return run_say(args);
    });
}

}  // namespace etude::cli
