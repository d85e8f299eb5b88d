// Where Piper voices are found: by path (VOICE.onnx with VOICE.onnx.json
// beside it, or the .json itself), or by name (VOICE) in the voice folders:
// each folder of ETUDE_VOICE_PATH (colon-separated) in order, then the
// per-user folder $XDG_DATA_HOME/libetude/voices (~/.local/share/... when
// XDG_DATA_HOME is unset). In a folder a voice is NAME.onnx + NAME.onnx.json,
// directly or in a sub-folder of its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"

namespace etude::piper {

// No voice of that name in the voice folders (public, engine/error.h).
using etude::VoiceNotFound;

struct VoiceFiles {
    std::string name;         // "en_US-joe-medium"
    std::string model_path;   // ".../en_US-joe-medium.onnx"
    std::string config_path;  // model_path + ".json"
    bool model_present = false;
};

// The folders searched for voices by name, in order (existing or not).
std::vector<std::string> voice_folders();

// True when the argument names a file rather than a voice by name: it holds
// a '/' or ends in ".onnx" or ".json".
bool looks_like_path(const std::string& voice);

// The voice a --voice argument means; nullopt when there is no such voice
// (the caller may then try its built-in voices). A path whose config is
// missing is an error (etude::Error naming the file expected).
std::optional<VoiceFiles> find_voice(const std::string& name_or_path);

// The same, but a voice that is not found is an error (VoiceNotFound) that
// lists the folders searched.
VoiceFiles require_voice(const std::string& name_or_path);

// Every voice in the voice folders (a name found twice: the first folder's).
std::vector<VoiceFiles> list_voices();

}  // namespace etude::piper
