// etude voices / etude devices: what the engine and the machine offer.
#include <algorithm>
#include <cstdio>

#include "audio-io/portaudio_output.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "engine/builtin_voices.h"
#include "engine/devices.h"
#include "engine/engine.h"
#include "engine/piper_files.h"

namespace etude::cli {

namespace {

void print_piper_voices() {
    std::puts("\nPiper voices (--voice NAME, or --voice PATH/VOICE.onnx):");
    const auto voices = engine::summarize_piper_voices();
    if (voices.empty()) std::puts("  none found");
    for (const auto& v : voices) {
        if (!v.problem.empty())
            std::printf("  %s  unusable: %s\n", v.name.c_str(), v.problem.c_str());
        else
            std::printf("  %s  %s%s\n      %s\n", v.name.c_str(), v.summary.c_str(),
                        v.model_present ? "" : " [no .onnx beside the .json]",
                        v.model_path.c_str());
    }
    std::puts("\nPiper voices are looked for by name in these folders, in order:");
    for (const auto& folder : engine::Engine::voice_folders())
        std::printf("  %s\n", folder.c_str());
    std::puts(
        "To add one, put VOICE.onnx and VOICE.onnx.json (as Piper distributes them, e.g.\n"
        "from huggingface.co/rhasspy/piper-voices) into one of those folders, or list\n"
        "more folders in ETUDE_VOICE_PATH (colon-separated). See docs/voices.md.");
}

}  // namespace

int voices_command(int argc, char** argv) {
    return run_command("voices", [&] {
        CommandLine args(
            "etude voices",
            "Lists the embedded voices (Flite clustergen voices, vocoded by LibEtude)\n"
            "with their native sample rate, then the Piper voices found in the voice\n"
            "folders (language, quality, sample rate, speakers), and where voices are\n"
            "looked for.");
        if (!args.parse(argc, argv)) return 0;
        for (const auto& name : engine::Engine::voices()) {
            const auto v = engine::builtin_voice_vocoding(name);
            std::printf("%-4s %s, %.0f Hz, %zu mel-cepstral coefficients, %zu excitation bands%s\n",
                        name.c_str(),
                        name == "slt"   ? "US English female"
                        : name == "rms" ? "US English male"
                                        : "Scottish English male",
                        v.sample_rate, v.mel_cepstral_order, v.excitation_bands,
                        name == "slt" ? " (default)" : "");
        }
        print_piper_voices();
        return 0;
    });
}

int devices_command(int argc, char** argv) {
    return run_command("devices", [&] {
        CommandLine args(
            "etude devices [--calibrate]",
            "Lists the compute devices (CUDA, Vulkan, OpenCL, CPU; best first, with the\n"
            "reason for anything missing, and what --backend auto picks), then the PortAudio\n"
            "host APIs and audio output devices; '*' marks the default output. Use an\n"
            "output's index or part of its name with 'etude say --play --device DEV'.");
        args.flag(
            "--calibrate",
            "also time each kernel on every compute device and show which one is fastest "
            "(takes seconds; the table is for choosing --backend, the engine does not use it)");
        args.footer("exit status: 0, also when no device exists; 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        std::puts("compute devices (best first):");
        for (const auto& d : engine::compute_devices()) {
            const double gib = static_cast<double>(d.global_memory) / (1024.0 * 1024.0 * 1024.0);
            if (d.backend == "vulkan") {
                // Vulkan does not count compute units; its type says what it is.
                std::string type = "unknown type";
                for (const char* t : {"discrete", "integrated", "virtual", "cpu"})
                    if (std::find(d.capabilities.begin(), d.capabilities.end(), t) !=
                        d.capabilities.end())
                        type = t;
                std::printf("  %-6s %d: %s [%s, %s; driver %s] %.1f GiB\n", d.backend.c_str(),
                            d.index, d.name.c_str(), d.platform.c_str(), type.c_str(),
                            d.driver.c_str(), gib);
                continue;
            }
            std::printf("  %-6s %d: %s [%s%s] %d compute units, %.1f GiB\n", d.backend.c_str(),
                        d.index, d.name.c_str(), d.platform.c_str(), d.is_gpu ? ", GPU" : "",
                        d.compute_units, gib);
        }
        for (const auto& n : engine::device_notes()) std::printf("  note: %s\n", n.c_str());
        // The GPU tier that streams get with --backend auto.
        try {
            const auto tier = engine::plan_gpu_tier(engine::with_device_environment({}));
            if (tier.use)
                std::printf("GPU tier for --backend auto: %s %d (%s)\n",
                            tier.device.backend.c_str(), tier.device.index,
                            tier.device.name.c_str());
            else
                std::printf("GPU tier for --backend auto: none, the CPU does it all (%s)\n",
                            tier.note.c_str());
        } catch (const std::exception& e) {
            std::printf("GPU tier for --backend auto: none (%s)\n", e.what());
        }

        if (args.flag("--calibrate")) {
            const auto calibration = engine::calibrate_kernels();
            for (const auto& d : calibration.skipped)
                std::printf("  (%s %d not calibrated: %s)\n", d.backend.c_str(), d.index,
                            d.error.c_str());
            std::puts("kernel registry (median ms per call; * = chosen):");
            for (const auto& c : calibration.table) {
                std::printf("  %-12s %-28s", c.op.c_str(), c.workload.c_str());
                for (std::size_t i = 0; i < c.measured.size(); ++i) {
                    if (c.measured[i].ms < 0)
                        std::printf("  %s n/a", c.measured[i].backend.c_str());
                    else
                        std::printf("  %s%s %.3f", i == c.chosen ? "*" : "",
                                    c.measured[i].backend.c_str(), c.measured[i].ms);
                }
                std::puts("");
            }
        }

        audio_io::PortAudioSystem pa;
        std::puts("audio host APIs:");
        for (const auto& api : pa.host_apis()) std::printf("  %s\n", api.c_str());
        const auto devices = pa.output_devices();
        std::puts("audio output devices:");
        if (devices.empty()) std::puts("  (none)");
        for (const auto& d : devices)
            std::printf("%c %3d: %s [%s] %d ch, %.0f Hz\n", d.is_default_output ? '*' : ' ',
                        d.index, d.name.c_str(), d.host_api.c_str(), d.max_output_channels,
                        d.default_sample_rate);
        return 0;
    });
}

}  // namespace etude::cli
