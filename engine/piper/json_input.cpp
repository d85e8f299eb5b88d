#include "engine/piper/json_input.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/piper/json_error.h"
#include "engine/utf8.h"

namespace etude::piper {

JsonInputLine parse_json_input_line(std::string_view line, const std::string& label) {
    using Json = nlohmann::json;
    if (auto bad = utf8::find_bad_sequence(line))
        throw Error(label + ": not valid UTF-8 (" + utf8::describe(*bad) + ")");
    Json j;
    try {
        j = Json::parse(line);
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e999
        throw Error(label + ": not a JSON object (" + json_error_reason(e) + ")");
    }
    if (!j.is_object()) throw Error(label + ": not a JSON object");
    JsonInputLine out;
    if (auto it = j.find("text"); it != j.end()) {
        if (!it->is_string()) throw Error(label + ": \"text\" must be a string");
        out.text = it->get<std::string>();
    }
    if (auto it = j.find("phoneme_ids"); it != j.end()) {
        if (!it->is_array() || it->empty())
            throw Error(label + ": \"phoneme_ids\" must be a non-empty list of whole numbers");
        std::vector<std::int64_t> ids;
        ids.reserve(it->size());
        for (const Json& id : *it) {
            if (!id.is_number_integer() ||
                (id.is_number_unsigned() && id.get<std::uint64_t>() > (1ull << 62)))
                throw Error(label + ": \"phoneme_ids\" holds " + id.dump() +
                            ", not a whole number");
            ids.push_back(id.get<std::int64_t>());
        }
        out.phoneme_ids = std::move(ids);
    }
    if (out.text && out.phoneme_ids)
        throw Error(label + ": give \"text\" or \"phoneme_ids\", not both");
    if (!out.text && !out.phoneme_ids) throw Error(label + ": needs \"text\" or \"phoneme_ids\"");
    if (auto it = j.find("speaker"); it != j.end() && !it->is_null()) {
        if (it->is_string())
            out.speaker = it->get<std::string>();
        else if (it->is_number_integer())
            out.speaker = it->dump();
        else
            throw Error(label + ": \"speaker\" must be a name or a number");
    }
    if (auto it = j.find("speaker_id"); it != j.end() && !it->is_null()) {
        if (!it->is_number_integer() ||
            (it->is_number_unsigned() && it->get<std::uint64_t>() > (1u << 30)))
            throw Error(label + ": \"speaker_id\" must be a whole number");
        out.speaker_id = it->get<std::int64_t>();
    }
    return out;
}

int speaker_for(const JsonInputLine& line, const VoiceConfig& voice, int fallback) {
    if (line.speaker_id) {
        if (*line.speaker_id < 0 || *line.speaker_id >= voice.num_speakers)
            throw Error(voice.path + ": speaker_id " + std::to_string(*line.speaker_id) +
                        " does not exist (ids 0.." + std::to_string(voice.num_speakers - 1) + ")");
        return static_cast<int>(*line.speaker_id);
    }
    if (line.speaker) return voice.speaker_id(*line.speaker);
    return fallback;
}

}  // namespace etude::piper
