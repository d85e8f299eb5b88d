// Piper's --json-input line format: one JSON object per line, either
// {"text": "..."} or {"phoneme_ids": [1, 0, ...]}, with an optional
// "speaker" (a name from the voice's speaker_id_map) or "speaker_id" (a
// number; it wins over "speaker", as in Piper). Other keys (Piper's
// "output_file") are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/piper/voice_config.h"

namespace etude::piper {

struct JsonInputLine {
    std::optional<std::string> text;
    std::optional<std::vector<std::int64_t>> phoneme_ids;
    std::optional<std::string> speaker;
    std::optional<std::int64_t> speaker_id;
};

// Throws etude::Error "LABEL: what" (label: "line 3" or "stdin:3").
JsonInputLine parse_json_input_line(std::string_view line, const std::string& label);

// The speaker a line asks for: speaker_id, else speaker (by name or
// number), else fallback. Throws etude::Error naming the voice when it has
// no such speaker.
int speaker_for(const JsonInputLine& line, const VoiceConfig& voice, int fallback);

}  // namespace etude::piper
