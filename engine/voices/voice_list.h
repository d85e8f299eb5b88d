// The voices the engine knows, described once for every front end
// (Engine::list_voices(), find_voice(), describe_voice(); VoiceInfo in
// engine.h). The built-in voices' facts are written here only.
#pragma once

#include <string>

#include "engine/engine.h"
#include "engine/piper/voice_config.h"

namespace etude::engine {

// A Piper voice's VoiceInfo from its config (describe_voice() then checks
// the network and takes the speakers and rate from it).
VoiceInfo piper_voice_info(const std::string& name, const std::string& model_path,
                           const piper::VoiceConfig& config);

}  // namespace etude::engine
