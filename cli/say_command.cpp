// etude say: text in, speech out (WAV file, raw PCM on stdout, or speakers).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/portaudio_output.h"
#include "audio-io/wav_writer.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/mark_timings.h"
#include "cli/say_input.h"
#include "cli/say_report.h"
#include "cli/voice_options.h"
#include "engine/devices.h"
#include "engine/engine.h"

namespace etude::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) {
    g_interrupted.store(true);
}

bool write_raw(std::span<const float> samples) {
    static std::vector<short> pcm(8192);
    if (pcm.size() < samples.size()) pcm.resize(samples.size());
    audio_io::float_to_pcm16(samples, std::span(pcm).first(samples.size()));
    // 16-bit little-endian: the host order on every platform we build for.
    const std::size_t n = std::fwrite(pcm.data(), sizeof(short), samples.size(), stdout);
    return n == samples.size() && std::fflush(stdout) == 0;
}

// The stream's options beyond the voice, and its rate: without --rate, the
// voice's own.
void apply_say_options(const CommandLine& args, engine::StreamOptions& opts) {
    apply_synthesis_options(args, opts);
    const auto* builtin = std::get_if<engine::BuiltinVoiceOptions>(&opts.voice);
    if (builtin && builtin->vocoder == "spectral") {
        // Fail early and clearly on a device that does not exist.
        const auto request = engine::with_device_environment({opts.backend, opts.device});
        engine::resolve_device(request);
        // A device named explicitly makes the blocks from the first one, so
        // wait for it to be ready (as etude jack does); otherwise a short
        // text is over before a cold device has built its state, and the
        // named device never shows at work.
        opts.wait_for_device = request.names_device();
    }
    if (!builtin) opts.sample_rate = 0;
    if (auto r = args.value("--rate")) opts.sample_rate = parse_number("--rate", *r);
}

// Where the speech goes: -o, --raw and --play (the default when none is
// given), checked against each other before any work.
struct SayOutputs {
    std::optional<std::string> wav_path;
    bool raw = false;
    bool play = false;
};

SayOutputs read_outputs(const CommandLine& args, std::size_t runs) {
    SayOutputs out;
    out.wav_path = args.value("-o") ? args.value("-o") : args.value("--output");
    if (out.wav_path && *out.wav_path == "-")
        throw UsageError(
            "-o -: a WAV file is written whole to a path; for audio on standard output use "
            "--raw (16-bit signed little-endian mono PCM)");
    out.raw = args.flag("--raw");
    out.play = args.flag("--play") || (!out.wav_path && !out.raw);
    if (out.raw && isatty(STDOUT_FILENO))
        throw Error(
            "--raw writes binary audio to standard output, which is a terminal; "
            "redirect it or pipe it to a player");
    if (out.raw && args.flag("--play")) throw UsageError("--raw and --play cannot be combined");
    if (args.flag("--float") && !out.wav_path) throw UsageError("--float needs -o FILE");
    if (out.play && runs > 1)
        throw UsageError("--play speaks with one speaker; these JSON lines ask for " +
                         std::to_string(runs) + " runs of different speakers");
    return out;
}

// Playing: the device is found first, and without --rate the stream speaks
// at the device's own rate (a JACK server, for one, accepts nothing else).
struct PlaybackDevice {
    std::optional<audio_io::PortAudioSystem> system;
    int index = -1;
};

void find_playback_device(const CommandLine& args, engine::StreamOptions& opts,
                          PlaybackDevice& device) {
    device.system.emplace();
    device.index = device.system->find_output_device(args.value_or("--device", ""),
                                                     args.value_or("--host-api", ""));
    if (!args.value("--rate"))
        for (const auto& d : device.system->output_devices())
            if (d.index == device.index && d.default_sample_rate >= 8000 &&
                d.default_sample_rate <= 192000)
                opts.sample_rate = d.default_sample_rate;
}

// One `etude say`: its engine, the stream of the run being spoken, and
// where the audio goes.
class SaySession {
  public:
    SaySession(const CommandLine& args, engine::StreamOptions opts,
               const std::vector<Utterances>& runs, const SayOutputs& outputs)
        : args_(args), opts_(std::move(opts)), runs_(runs), outputs_(outputs) {
        if (outputs_.play) find_playback_device(args_, opts_, playback_);
        // A Piper voice is read once and kept for every run of speakers.
        engine::Engine::Options engine_options;
        engine_options.preload_voices.clear();
        if (const auto* piper = std::get_if<engine::PiperVoiceOptions>(&opts_.voice))
            engine_options.preload_voices.push_back(piper->piper_voice);
        engine_options.preload_backend = opts_.backend;
        engine_options.preload_device = opts_.device;
        // The trace's kernel rows and --stats' kernel table need the times.
        engine_options.profile_kernels = args_.value("--trace") || args_.flag("--stats");
        engine_options.device_precision = parse_precision_option(args_);
        engine_.emplace(engine_options);
        set_speaker(runs_.front().speaker);
        stream_ = engine_->create_stream(opts_);  // checks voice and rate
        rate_ = stream_->sample_rate();
        open_outputs();
    }

    // Speaks every run and returns the stream statistics summed over them.
    engine::StreamStats speak() {
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
        std::signal(SIGPIPE, SIG_IGN);
        const bool long_text = text_bytes(runs_) > 200;
        progress_.emplace(
            !args_.flag("-q") && !args_.flag("--quiet") && isatty(STDERR_FILENO) && long_text,
            rate_);
        engine::StreamStats stats = player_ ? play() : render();
        progress_->update(stream_->stats(), true);
        progress_->finish();
        return stats;
    }

    // After speech: an interruption or no audio at all is an error (no file
    // is written); otherwise the file, the timings, the trace and --stats.
    void finish(const engine::StreamStats& stats) {
        if (g_interrupted) {
            stream_->cancel();
            throw Error("interrupted; no output file written");
        }
        const char* front_end =
            std::holds_alternative<engine::PiperVoiceOptions>(opts_.voice) ? "the voice" : "Flite";
        const std::string& refusal = stats.unspeakable_reason;
        // A sentence the voice's network refused says why (the last such
        // reason), not that there was nothing to pronounce.
        if (stats.samples_delivered == 0)
            throw Error(refusal.empty() ? std::string("the text produced no speech (nothing ") +
                                              front_end + " could pronounce)"
                                        : "the text produced no speech: " + refusal);
        if (timings_) {
            timings_->drain(*stream_, rate_, 0);
            timings_->finish();
        }
        if (wav_) wav_->commit();
        const auto unspeakable = static_cast<unsigned long long>(stats.sentences_unspeakable);
        if (unspeakable > 0 && refusal.empty())
            std::fprintf(
                stderr,
                "etude say: %llu sentence(s) had nothing %s could pronounce and were skipped\n",
                unspeakable, front_end);
        else if (unspeakable > 0)
            std::fprintf(stderr,
                         "etude say: %llu sentence(s) were refused and skipped (last: %s)\n",
                         unspeakable, refusal.c_str());
        if (auto trace = args_.value("--trace")) stream_->write_trace(*trace);
        if (args_.flag("--stats")) print_stats(stats, opts_, rate_);
    }

  private:
    void open_outputs() {
        if (outputs_.wav_path)
            wav_.emplace(
                *outputs_.wav_path, static_cast<int>(rate_),
                args_.flag("--float") ? audio_io::WavFormat::Float32 : audio_io::WavFormat::Pcm16);
        if (auto trace = args_.value("--trace")) engine::Stream::check_trace_path(*trace);
        if (auto t = args_.value("--timings")) {
            timings_.emplace(*t);
            stream_->report_words(true);
        }
        if (!outputs_.play) return;
        // With -o too, the played audio is copied to the file through a tap.
        if (wav_) tap_ = std::make_unique<rt::SpscRing<float>>(static_cast<std::size_t>(rate_ * 4));
        player_ = std::make_unique<audio_io::PortAudioOutput>(*playback_.system, *stream_,
                                                              playback_.index, 256, tap_.get());
    }

    // --play: the one run, pulled by the audio device's callback.
    engine::StreamStats play() {
        push(*stream_, runs_.front());
        player_->start();
        while (!g_interrupted && stream_->busy()) {
            drain_tap();
            if (timings_) timings_->drain(*stream_, rate_, 0);
            progress_->update(stream_->stats());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        // Let the device play out what it has buffered.
        std::this_thread::sleep_for(
            std::chrono::duration<double>(player_->output_latency_seconds() + 0.05));
        player_->stop();
        drain_tap();
        if (tap_ && player_->tap_overflows())
            throw Error("the WAV copy of the played audio overflowed; nothing was written");
        return stream_->stats();
    }

    void drain_tap() {
        if (!tap_) return;
        std::size_t n;
        while ((n = tap_->read(block_)) > 0) wav_->write(std::span(block_).first(n));
    }

    // -o and --raw: each run on a stream of its own, read as it is made.
    engine::StreamStats render() {
        engine::StreamStats stats;
        for (std::size_t r = 0; r < runs_.size() && !g_interrupted; ++r) {
            if (r > 0) {  // the next speaker's lines: a stream of its own
                set_speaker(runs_[r].speaker);
                stream_.reset();
                stream_ = engine_->create_stream(opts_);
                if (timings_) stream_->report_words(true);
            }
            push(*stream_, runs_[r]);
            render_run(r > 0 ? stats.samples_delivered : 0);
            add_run(stats, stream_->stats(), r == 0);
        }
        return stats;
    }

    // Writes the current stream's audio; `offset` is the samples of the
    // runs before it.
    void render_run(std::uint64_t offset) {
        std::size_t n;
        while (!g_interrupted && (n = next_block()) > 0) {
            const auto chunk = std::span<const float>(block_).first(n);
            if (wav_) wav_->write(chunk);
            if (outputs_.raw && !write_raw(chunk)) {
                progress_->finish();
                throw Error("standard output was closed after " +
                            std::to_string(offset + stream_->stats().samples_delivered) +
                            " samples; stopping");
            }
            if (timings_) timings_->drain(*stream_, rate_, offset);
            progress_->update(stream_->stats());
        }
        if (timings_) timings_->drain(*stream_, rate_, offset);
    }

    // Raw audio usually goes to a player (`| aplay`): it is read as a live
    // consumer reads (read_some), which keeps the stream's real-time
    // priority and its turns across streams; a WAV file is an offline
    // render (read), which steps down (docs/tuning.md).
    std::size_t next_block() {
        if (!outputs_.raw) return stream_->read(block_);
        for (;;) {
            const std::size_t got = stream_->read_some(block_, 200);
            if (got > 0 || !stream_->busy() || g_interrupted) return got;
        }
    }

    // A run's speaker: a Piper voice's (a built-in voice's runs have none).
    void set_speaker(const std::string& speaker) {
        if (auto* piper = std::get_if<engine::PiperVoiceOptions>(&opts_.voice))
            piper->speaker = speaker;
    }

    const CommandLine& args_;
    engine::StreamOptions opts_;
    const std::vector<Utterances>& runs_;
    const SayOutputs outputs_;
    PlaybackDevice playback_;
    std::optional<engine::Engine> engine_;
    std::unique_ptr<engine::Stream> stream_;
    double rate_ = 0;
    std::optional<audio_io::WavWriter> wav_;
    std::optional<MarkTimings> timings_;
    std::unique_ptr<rt::SpscRing<float>> tap_;
    std::unique_ptr<audio_io::PortAudioOutput> player_;
    std::optional<Progress> progress_;
    std::vector<float> block_ = std::vector<float>(4096);
};

int run_say(const CommandLine& args) {
    // Everything is checked before any work: the voice, the input, the
    // options, the outputs.
    std::vector<std::string> notes;
    VoiceFolders folders;
    for (const auto& f : args.values("--data-dir")) folders.emplace_back("--data-dir", f);
    search_voice_folders_first(folders, notes);
    for (const auto& note : notes) std::fprintf(stderr, "etude say: %s\n", note.c_str());
    engine::StreamOptions opts;
    apply_voice_options(args, opts);
    const std::vector<Utterances> runs = read_utterances(args, opts);
    apply_say_options(args, opts);
    const SayOutputs outputs = read_outputs(args, runs.size());
    SaySession session(args, std::move(opts), runs, outputs);
    session.finish(session.speak());
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
        args.option("--data-dir", "DIR",
                    "a voice folder searched first, before ETUDE_VOICE_PATH's (Piper's option; "
                    "repeatable): --voice NAME finds DIR/NAME.onnx");
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
            .option("--precision", "MODE", kPrecisionOptionHelp)
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
            "piper-tts's spellings are taken too: -m/--model (--voice), -s (--speaker),\n"
            "-f/--output-file (-o), --output-raw (--raw), --length_scale and the other\n"
            "underscored names.\n"
            "\n"
            "exit status: 0 spoken, 1 runtime error (bad text, unwritable file, no device),\n"
            "2 usage error.\n"
            "\n"
            "examples:\n"
            "  etude say \"Hello world.\" -o hello.wav\n"
            "  etude say --voice rms --rate 48000 --play < chapter.txt\n"
            "  etude say --voice en_US-joe-medium --seed 7 \"A natural voice.\" -o joe.wav\n"
            "  etude say --raw \"Piping speech.\" | aplay -f S16_LE -r 16000 -c 1\n");
        // piper-tts's spellings of the options are taken too (voice_options.h).
        std::vector<std::string> words = with_piper_spellings(argc, argv);
        std::vector<char*> pointers;
        for (auto& w : words) pointers.push_back(w.data());
        if (!args.parse(static_cast<int>(pointers.size()), pointers.data())) return 0;
        return run_say(args);
    });
}

}  // namespace etude::cli
