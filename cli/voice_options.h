// The options that choose and tune a voice, shared by the commands that
// speak text (say, jack): --voice, a built-in voice or a Piper voice by path
// or by name, and Piper's synthesis options with Piper's own names.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/command_line.h"
#include "engine/engine.h"

namespace etude::cli {

// Declares --voice (with `voice_help`) and the Piper options.
void declare_voice_options(CommandLine& args, const std::string& voice_help);

// Sets opts.voice: a built-in voice, or a Piper voice and its options. Throws
// etude::Error for a voice that is neither built in nor a Piper voice
// (naming the folders searched), UsageError for a Piper option given with a
// built-in voice or a malformed number.
void apply_voice_options(const CommandLine& args, engine::StreamOptions& opts);

// --sentence-silence SECONDS (declared by declare_voice_options()) as
// PiperVoiceOptions::sentence_silence_ms; 0 when absent. UsageError outside
// 0..60 s.
double sentence_silence_option(const CommandLine& args);

// Voice folders a command line names, each with the option that named it
// (--data-dir, Piper's and wyoming-piper's name): searched before
// ETUDE_VOICE_PATH's, in the order given (the engine reads the folders
// from the environment: call before any thread starts). One that does not
// exist is passed over with a note in `notes`, as wyoming-piper passes it
// over; a name with ':' is a UsageError.
using VoiceFolders = std::vector<std::pair<std::string, std::string>>;  // option, folder
void search_voice_folders_first(const VoiceFolders& folders, std::vector<std::string>& notes);

// The command line with piper-tts's spellings of the options (-m, --model,
// -s, -f, --output-file, --output-raw, --length_scale and the other
// underscored names) as ours, so that a command written for piper runs
// (`etude say` takes them); what follows "--" is left as it is.
std::vector<std::string> with_piper_spellings(int argc, char** argv);

// The --voice help shared by the commands.
extern const char* const kVoiceOptionHelp;

// Where a command's GPU work runs: --backend (default auto) and
// --gpu-device (default -1, the best). A backend name or index that is
// malformed is a UsageError; whether the device exists is not checked here.
struct BackendChoice {
    std::string backend = "auto";
    int device = -1;
};
BackendChoice parse_backend_options(const CommandLine& args);

// --precision fp32|tf32 (default fp32): the arithmetic of the devices'
// matrix products (engine::DevicePrecision). Anything else is a UsageError.
engine::DevicePrecision parse_precision_option(const CommandLine& args);
extern const char* const kPrecisionOptionHelp;

// The options of a speaking command beyond the voice (say, jack):
// --latency-ms, --vocoder (mlsa or spectral; built-in voices only) and the
// backend. Call after apply_voice_options(), which says whether the voice
// is a Piper voice.
void apply_synthesis_options(const CommandLine& args, engine::StreamOptions& opts);

}  // namespace etude::cli
