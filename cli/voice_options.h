// The options that choose and tune a voice, shared by the commands that
// speak text (say, jack): --voice, a built-in voice or a Piper voice by path
// or by name, and Piper's synthesis options with Piper's own names.
#pragma once

#include <string>

#include "cli/command_line.h"
#include "engine/engine.h"

namespace etude::cli {

// Declares --voice (with `voice_help`) and the Piper options.
void declare_voice_options(CommandLine& args, const std::string& voice_help);

// Sets opts.voice, or opts.piper_voice and the Piper options. Throws
// etude::Error for a voice that is neither built in nor a Piper voice
// (naming the folders searched), UsageError for a Piper option given with a
// built-in voice or a malformed number.
void apply_voice_options(const CommandLine& args, engine::StreamOptions& opts);

// The --voice help shared by the commands.
extern const char* const kVoiceOptionHelp;

}  // namespace etude::cli
