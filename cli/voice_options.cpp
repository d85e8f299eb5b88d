#include "cli/voice_options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "engine/devices.h"
#include "engine/error.h"

namespace etude::cli {

const char* const kVoiceOptionHelp =
    "slt (default, female US English), rms (male), awb (male, Scottish), or a Piper voice: "
    "PATH/VOICE.onnx (VOICE.onnx.json beside it) or a name from 'etude voices'";

void declare_voice_options(CommandLine& args, const std::string& voice_help) {
    args.option("--voice", "VOICE", voice_help)
        .option("--speaker", "NAME|ID",
                "Piper voices with several speakers: a name from the voice's speaker_id_map, "
                "else an id (default: the voice's default speaker)")
        .option("--noise-scale", "X",
                "Piper voices: the prior's noise, 0 or more (default: the voice's, often 0.667)")
        .option("--length-scale", "X",
                "the speaking pace; larger is slower (default: the voice's, often 1). Piper "
                "voices: above 0; built-in voices: 0.1 to 10, Flite's duration stretch")
        .option("--noise-w,--noise-w-scale", "X",
                "Piper voices: the durations' noise, 0 or more (default: the voice's, often 0.8)")
        .option("--sentence-silence", "SECONDS",
                "Piper voices: silence between sentences, 0 to 60 (default 0), as Piper's own "
                "option")
        .option("--seed", "N",
                "Piper voices: seeds the noise; the same seed and text give the same audio "
                "(default 0)");
}

namespace {

std::optional<float> scale_option(const CommandLine& args, const char* name) {
    auto v = args.value(name);
    if (!v) return std::nullopt;
    return static_cast<float>(parse_number(name, *v));
}

}  // namespace

void search_voice_folders_first(const VoiceFolders& folders, std::vector<std::string>& notes) {
    std::string path;
    for (const auto& [option, f] : folders) {
        if (f.empty() || f.find(':') != std::string::npos)
            throw UsageError(option + " must be a folder without ':' in its name, not '" + f + "'");
        std::error_code ec;
        if (!std::filesystem::is_directory(f, ec)) {
            notes.push_back(option + " " + f + ": no such folder; no voices from it");
            continue;
        }
        path += (path.empty() ? "" : ":") + f;
    }
    if (path.empty()) return;
    if (const char* rest = std::getenv("ETUDE_VOICE_PATH"); rest && *rest)
        path += std::string(":") + rest;
    ::setenv("ETUDE_VOICE_PATH", path.c_str(), 1);
}

std::vector<std::string> with_piper_spellings(int argc, char** argv) {
    // piper-tts's names (its __main__.py) and ours.
    static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
        {"-m", "--voice"},
        {"--model", "--voice"},
        {"-s", "--speaker"},
        {"-f", "--output"},
        {"--output-file", "--output"},
        {"--output_file", "--output"},
        {"--output-raw", "--raw"},
        {"--output_raw", "--raw"},
        {"--length_scale", "--length-scale"},
        {"--noise_scale", "--noise-scale"},
        {"--noise_w", "--noise-w"},
        {"--noise_w_scale", "--noise-w"},
        {"--sentence_silence", "--sentence-silence"},
        {"--data_dir", "--data-dir"},
    };
    std::vector<std::string> out;
    bool options = true;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--") options = false;
        if (options && i > 0 && a.size() > 1 && a[0] == '-') {
            const std::size_t eq = a.find('=');
            const std::string_view name = std::string_view(a).substr(0, eq);
            for (const auto& [piper, ours] : kNames)
                if (name == piper) {
                    a = std::string(ours) + (eq == std::string::npos ? "" : a.substr(eq));
                    break;
                }
        }
        out.push_back(std::move(a));
    }
    return out;
}

double sentence_silence_option(const CommandLine& args) {
    const auto v = args.value("--sentence-silence");
    if (!v) return 0.0;
    const double seconds = parse_number("--sentence-silence", *v);
    if (!(seconds >= 0.0 && seconds <= 60.0))
        throw UsageError("--sentence-silence must be 0 to 60 seconds, not '" + *v + "'");
    return seconds * 1000.0;
}

void apply_voice_options(const CommandLine& args, engine::StreamOptions& opts) {
    const std::string voice = args.value_or("--voice", "slt");
    const auto& builtin = engine::Engine::voices();
    const bool piper = std::find(builtin.begin(), builtin.end(), voice) == builtin.end();
    std::string found_path;
    if (piper) {
        const auto found = engine::Engine::find_voice(voice);
        if (!found) {
            std::string why = "no Piper voice '" + voice + "'";
            try {
                (void)engine::Engine::describe_voice(voice);  // the engine's own account
            } catch (const Error& e) {
                why = e.what();  // names the folders searched
            }
            std::string choices;
            for (const auto& b : builtin) choices += (choices.empty() ? "" : ", ") + b;
            throw Error("unknown voice '" + voice + "' (choose one of: " + choices + "); " + why +
                        "; see 'etude voices'");
        }
        found_path = found->model_path;
    }
    const std::optional<float> length_scale = scale_option(args, "--length-scale");
    if (!piper) {
        for (const char* name :
             {"--speaker", "--noise-scale", "--noise-w", "--seed", "--sentence-silence"})
            if (args.value(name))
                throw UsageError(std::string(name) + " applies to Piper voices; '" + voice +
                                 "' is a built-in voice");
        opts.voice = engine::BuiltinVoiceOptions{.voice = voice, .length_scale = length_scale};
        return;
    }
    engine::PiperVoiceOptions p{.piper_voice = found_path, .length_scale = length_scale};
    p.speaker = args.value_or("--speaker", "");
    p.noise_scale = scale_option(args, "--noise-scale");
    p.noise_w = scale_option(args, "--noise-w");
    p.sentence_silence_ms = sentence_silence_option(args);
    if (auto s = args.value("--seed")) {
        const double seed = parse_number("--seed", *s);
        if (!(seed >= 0 && seed <= 9007199254740992.0 && seed == std::floor(seed)))
            throw UsageError("--seed must be a whole number from 0 to 2^53, not '" + *s + "'");
        p.seed = static_cast<std::uint64_t>(seed);
    }
    opts.voice = std::move(p);
}

BackendChoice parse_backend_options(const CommandLine& args) {
    BackendChoice choice;
    choice.backend = args.value_or("--backend", "auto");
    if (auto d = args.value("--gpu-device"))
        choice.device = static_cast<int>(parse_number("--gpu-device", *d));
    try {
        engine::parse_device_request(choice.backend, choice.device);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return choice;
}

const char* const kPrecisionOptionHelp =
    "the GPU's matrix products: fp32 (default: the same audio as the CPU, within the parity "
    "bounds) or tf32 (CUDA's tensor cores: faster, each product's inputs rounded to 10 mantissa "
    "bits; other devices stay fp32)";

engine::DevicePrecision parse_precision_option(const CommandLine& args) {
    try {
        return engine::parse_device_precision(args.value_or("--precision", "fp32"));
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--precision: ") + e.what());
    }
}

void apply_synthesis_options(const CommandLine& args, engine::StreamOptions& opts) {
    if (auto l = args.value("--latency-ms")) opts.latency_ms = parse_number("--latency-ms", *l);
    const std::string vocoder = args.value_or("--vocoder", "mlsa");
    if (vocoder != "mlsa" && vocoder != "spectral")
        throw UsageError("unknown vocoder '" + vocoder + "' (choose mlsa or spectral)");
    if (auto* builtin = std::get_if<engine::BuiltinVoiceOptions>(&opts.voice))
        builtin->vocoder = vocoder;
    else if (vocoder != "mlsa")
        throw UsageError("--vocoder applies to the built-in voices; a Piper voice has its own");
    const BackendChoice choice = parse_backend_options(args);
    opts.backend = choice.backend;
    opts.device = choice.device;
}

}  // namespace etude::cli
