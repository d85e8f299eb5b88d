// etude: the command-line front door to LibEtude.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage = R"(usage: etude <command> [options]

LibEtude speaks text while it plays: a real-time streaming speech synthesizer.

commands:
  say        speak text (argument or standard input) to a WAV file, a pipe or the speakers
  jack       a JACK client that speaks lines from standard input as they arrive
  voices     list the voices: the embedded ones and Piper voices found in the voice folders
  devices    list compute devices (CPU, OpenCL, CUDA) and audio outputs
  bench      measure synthesis speed, time to first audio and memory
  info       validate a LEF model file and list what it holds
  vocode     turn a mel spectrogram (.npy) into speech with a neural vocoder (LEF model)
  resynth    copy synthesis: speech -> the model's mel -> speech
  phonemize  a Piper voice's phonemes and phoneme ids for text (JSON lines)
  serve      serve speech to voice assistants (Wyoming, for Home Assistant)

Run 'etude <command> --help' for the options of each command.
)";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
        !std::strcmp(argv[1], "help")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        std::puts("etude 0.1.0");
        return 0;
    }
    const std::string cmd = argv[1];
    if (cmd == "say") return etude::cli::say_command(argc, argv);
    if (cmd == "voices") return etude::cli::voices_command(argc, argv);
    if (cmd == "devices") return etude::cli::devices_command(argc, argv);
    if (cmd == "bench") return etude::cli::bench_command(argc, argv);
    if (cmd == "jack") return etude::cli::jack_command(argc, argv);
    if (cmd == "info") return etude::cli::info_command(argc, argv);
    if (cmd == "vocode") return etude::cli::vocode_command(argc, argv);
    if (cmd == "resynth") return etude::cli::resynth_command(argc, argv);
    if (cmd == "phonemize") return etude::cli::phonemize_command(argc, argv);
    if (cmd == "serve") return etude::cli::serve_command(argc, argv);
    std::fprintf(stderr, "etude: unknown command '%s' (try 'etude --help')\n", cmd.c_str());
    return 2;
}
