// etude vocode: mel spectrogram (.npy) -> speech through a neural vocoder.
// etude resynth: speech -> mel (the model's own front end) -> speech again
// (copy synthesis), to hear what a model does with a known input.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "audio-io/npy_file.h"
#include "audio-io/wav_writer.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/voice_options.h"
#include "dsp/resampler.h"
#include "engine/error.h"
#include "engine/file_vocoder.h"

namespace etude::cli {
namespace {

struct Common {
    std::string model_path, output;
    bool float_wav = false, quiet = false;
    std::string backend = "auto";
    int device = -1;
};

int device_option(const CommandLine& args) {
    if (!args.value("--device")) return -1;
    const double d = parse_number("--device", *args.value("--device"));
    if (d < 0 || d != std::floor(d)) throw UsageError("option --device expects an index >= 0");
    return static_cast<int>(d);
}

// The output WAV. Opened before the network runs, so that an unwritable
// path fails at once rather than after minutes of vocoding; then written
// chunk by chunk as the stream hands audio out (through a streaming
// resampler when --rate asks for another rate), so a long input is never
// held whole as audio. The file appears only on commit().
class WavSink {
  public:
    WavSink(const std::string& path, int model_rate, double out_rate, bool float_wav)
        : writer_(path, out_rate > 0 ? static_cast<int>(std::lround(out_rate)) : model_rate,
                  float_wav ? audio_io::WavFormat::Float32 : audio_io::WavFormat::Pcm16) {
        if (out_rate > 0 && std::lround(out_rate) != model_rate)
            resampler_.emplace(model_rate, out_rate);
    }
    void write(std::span<const float> audio, bool last) {
        samples_ += audio.size();
        if (!resampler_) {
            writer_.write(audio);
            return;
        }
        converted_.resize(resampler_->max_output_for(audio.size()));
        const std::size_t n = resampler_->process(audio, converted_, last);
        writer_.write(std::span<const float>(converted_).first(n));
    }
    void commit() { writer_.commit(); }
    std::size_t samples() const { return samples_; }  // at the model's rate

  private:
    audio_io::WavWriter writer_;
    std::optional<dsp::StreamingResampler> resampler_;
    std::vector<float> converted_;
    std::size_t samples_ = 0;
};

// Mel frames per step unless --chunk says otherwise: the stream never runs
// more than 512 at once anyway, and steps this long cost no more than one
// run over the whole input (docs/benchmarks.md).
constexpr int kDefaultChunk = 256;

// Runs `mel` through the model in chunks of `chunk` frames into `sink`, with
// a progress line on a terminal for long inputs.
void run_model(engine::FileVocoder& vocoder, const std::vector<float>& mel, int frames, int chunk,
               bool quiet, WavSink& sink) {
    if (chunk <= 0) chunk = kDefaultChunk;
    const bool progress = !quiet && isatty(STDERR_FILENO) && frames > 4 * chunk;
    for (int f0 = 0; f0 < frames; f0 += chunk) {
        const int n = std::min(chunk, frames - f0);
        sink.write(vocoder.push(mel, frames, f0, n), false);
        if (progress)
            std::fprintf(stderr, "\rvocoding: %d/%d frames (%.0f%%)", f0 + n, frames,
                         100.0 * (f0 + n) / frames);
    }
    sink.write(vocoder.finish(), true);
    sink.commit();
    if (progress) std::fputc('\n', stderr);
}

// A whole signal from one rate to another (one pass, flushed).
std::vector<float> resample_whole(std::span<const float> in, double from, double to) {
    dsp::StreamingResampler rs(from, to);
    std::vector<float> out(rs.max_output_for(in.size()));
    out.resize(rs.process(in, out, true));
    return out;
}

// The model on its device, with the CPU behind it: a device that fails or
// never finishes (a fence that times out on a device too slow for the
// network) does not cost the file; each failure is said on standard error.
engine::FileVocoder load_model(const char* command, const Common& c) {
    return engine::FileVocoder(
        c.model_path, c.backend, c.device, [command](const std::string& error, bool while_loading) {
            if (while_loading)
                std::fprintf(stderr, "etude %s: %s; the model runs on the CPU\n", command,
                             error.c_str());
            else
                std::fprintf(stderr, "\netude %s: %s; the CPU makes the rest of the audio\n",
                             command, error.c_str());
        });
}

}  // namespace

int vocode_command(int argc, char** argv) {
    return run_command("vocode", [&] {
        CommandLine args(
            "etude vocode --model MODEL.lef --mel MEL.npy -o OUT.wav [options]",
            "Turns a log-mel spectrogram into speech with a neural vocoder converted by\n"
            "tools/convert.py (HiFi-GAN or Vocos). The mel must be what the model was\n"
            "trained on (its front end is described in the model's metadata; see\n"
            "'etude info MODEL.lef'): NumPy float32 (or float64), shape (n_mels, frames)\n"
            "as PyTorch holds it, or (1, n_mels, frames).");
        args.option("--model", "FILE", "the LEF model file (required)")
            .option("--mel", "FILE", "the input .npy (required)")
            .option("-o,--output", "FILE", "the WAV file to write (required; written atomically)")
            .flag("--float", "32-bit float WAV (default: 16-bit PCM)")
            .option("--rate", "HZ",
                    "resample the output to HZ, 8000-192000 (default: the model's rate)")
            .option(
                "--backend", "KIND",
                "auto, cpu, cuda, vulkan or opencl: where the network runs (default auto: a GPU "
                "if there is one, else the CPU)")
            .option("--device", "N",
                    "device index within the backend (default: the best; see 'etude devices')")
            .option("--precision", "MODE", kPrecisionOptionHelp)
            .option("--chunk", "FRAMES",
                    "mel frames per step, as a stream takes them (default 256; any size gives the "
                    "same audio to float rounding). The audio goes to the file step by step, with "
                    "progress shown on a terminal for long inputs")
            .flag("-q,--quiet", "no progress line or summary");
        args.footer("exit status: 0 written, 1 runtime error (bad model or mel), 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        Common c;
        c.model_path = args.value_or("--model", "");
        c.output = args.value_or("-o", args.value_or("--output", ""));
        const std::string mel_path = args.value_or("--mel", "");
        if (c.model_path.empty()) throw UsageError("--model MODEL.lef is required");
        if (mel_path.empty()) throw UsageError("--mel MEL.npy is required");
        if (c.output.empty()) throw UsageError("-o OUT.wav is required");
        c.float_wav = args.flag("--float");
        c.quiet = args.flag("-q") || args.flag("--quiet");
        c.backend = args.value_or("--backend", "auto");
        c.device = device_option(args);
        engine::set_device_precision(parse_precision_option(args));
        double rate = 0;
        if (args.value("--rate")) {
            rate = parse_number("--rate", *args.value("--rate"));
            if (rate < 8000 || rate > 192000)
                throw UsageError("option --rate must be within 8000..192000 Hz");
        }
        int chunk = 0;
        if (args.value("--chunk")) {
            const double v = parse_number("--chunk", *args.value("--chunk"));
            if (v < 1 || v != std::floor(v) || v > 1e6)
                throw UsageError("option --chunk expects a whole number of frames >= 1");
            chunk = static_cast<int>(v);
        }

        // Input first: a bad mel file should not wait for a model upload.
        const auto npy = audio_io::read_npy(mel_path);
        std::size_t n_mels = 0, frames = 0;
        if (npy.shape.size() == 2) {
            n_mels = npy.shape[0];
            frames = npy.shape[1];
        } else if (npy.shape.size() == 3 && npy.shape[0] == 1) {
            n_mels = npy.shape[1];
            frames = npy.shape[2];
        } else {
            std::string s;
            for (auto d : npy.shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
            throw Error(
                mel_path + ": shape (" + s +
                ") is not a mel spectrogram; expected (n_mels, frames) or (1, n_mels, frames)");
        }
        for (std::size_t i = 0; i < npy.data.size(); ++i)
            if (!std::isfinite(npy.data[i]))
                throw Error(mel_path + ": value " + std::to_string(i) +
                            " is not finite (a log-mel must be finite; clamp before the log)");
        if (frames == 0) throw Error(mel_path + ": the mel has no frames");
        auto vocoder = load_model("vocode", c);
        const auto& model = vocoder.model();
        if (n_mels != static_cast<std::size_t>(model.n_mels))
            throw Error(mel_path + ": " + std::to_string(n_mels) + " mel bands, but " +
                        c.model_path + " takes " + std::to_string(model.n_mels) +
                        (frames == static_cast<std::size_t>(model.n_mels)
                             ? " (the array looks transposed: a mel is (n_mels, frames), as "
                               "PyTorch holds it)"
                             : ""));
        WavSink sink(c.output, model.sample_rate, rate, c.float_wav);
        run_model(vocoder, npy.data, static_cast<int>(frames), chunk, c.quiet, sink);
        if (!c.quiet)
            std::fprintf(stderr, "%s: %zu frames -> %.2f s of audio (%s on %s)\n", c.output.c_str(),
                         frames, static_cast<double>(sink.samples()) / model.sample_rate,
                         model.architecture.c_str(), vocoder.where().c_str());
        return 0;
    });
}

int resynth_command(int argc, char** argv) {
    return run_command("resynth", [&] {
        CommandLine args(
            "etude resynth IN.wav --model MODEL.lef -o OUT.wav [options]",
            "Copy synthesis: computes the log-mel of IN.wav with the front end the model\n"
            "was trained with (HiFi-GAN: Slaney mel, reflect padding; Vocos: HTK mel,\n"
            "centred STFT; read from the model's metadata), then vocodes it. The input is\n"
            "resampled to the model's rate first if needed (first channel only).");
        args.positionals("IN.wav", "the speech to resynthesise (any format libsndfile reads)");
        args.option("--model", "FILE", "the LEF model file (required)")
            .option("-o,--output", "FILE", "the WAV file to write (required; written atomically)")
            .option("--mel-out", "FILE", "also write the computed log-mel as .npy (n_mels, frames)")
            .flag("--float", "32-bit float WAV (default: 16-bit PCM)")
            .option("--backend", "KIND",
                    "auto, cpu, cuda, vulkan or opencl (default auto: a GPU if there is one, else "
                    "the CPU)")
            .option("--device", "N",
                    "device index within the backend (default: the best; see 'etude devices')")
            .option("--precision", "MODE", kPrecisionOptionHelp)
            .flag("-q,--quiet", "no progress line or summary");
        args.footer(
            "exit status: 0 written, 1 runtime error (bad model or input), 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        if (args.positional().size() != 1) throw UsageError("expected one input file, IN.wav");
        Common c;
        c.model_path = args.value_or("--model", "");
        c.output = args.value_or("-o", args.value_or("--output", ""));
        if (c.model_path.empty()) throw UsageError("--model MODEL.lef is required");
        if (c.output.empty()) throw UsageError("-o OUT.wav is required");
        c.float_wav = args.flag("--float");
        c.quiet = args.flag("-q") || args.flag("--quiet");
        c.backend = args.value_or("--backend", "auto");
        c.device = device_option(args);
        engine::set_device_precision(parse_precision_option(args));

        auto input = audio_io::read_audio_file(args.positional()[0]);
        auto vocoder = load_model("resynth", c);
        const auto& a = vocoder.model();
        if (input.sample_rate != a.sample_rate)
            input.samples = resample_whole(input.samples, input.sample_rate, a.sample_rate);
        WavSink sink(c.output, a.sample_rate, 0, c.float_wav);
        std::size_t frames = 0;
        const auto mel = vocoder.log_mel(input.samples, frames);
        if (auto mel_out = args.value("--mel-out"))
            audio_io::write_npy(*mel_out, {static_cast<std::size_t>(a.n_mels), frames}, mel);
        run_model(vocoder, mel, static_cast<int>(frames), kDefaultChunk, c.quiet, sink);
        if (!c.quiet)
            std::fprintf(stderr, "%s: %.2f s in, %zu mel frames, %.2f s out (%s on %s)\n",
                         c.output.c_str(),
                         static_cast<double>(input.samples.size()) / a.sample_rate, frames,
                         static_cast<double>(sink.samples()) / a.sample_rate,
                         a.architecture.c_str(), vocoder.where().c_str());
        return 0;
    });
}

}  // namespace etude::cli
