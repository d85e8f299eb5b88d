// Engine::list_voices(), find_voice() and voice_folders(): the built-in
// voices' facts and the Piper voices of the voice folders
// (engine/piper/voice_catalog.h holds the folder rules).
#include "engine/voices/voice_list.h"

#include <algorithm>
#include <array>

#include "engine/piper/voice_catalog.h"

namespace etude::engine {
namespace {

struct BuiltinFacts {
    const char* name;
    const char* language;
    const char* description;
};

// Flite's clustergen voices from the CMU ARCTIC databases, vocoded by
// LibEtude's MLSA vocoder at their own 16 kHz; slt, the default, first.
// The same names as FliteVoice::names() (tests/engine checks it).
constexpr std::array<BuiltinFacts, 3> kBuiltin{{
    {"slt", "en_US", "US English female"},
    {"rms", "en_US", "US English male"},
    {"awb", "en_GB", "Scottish English male"},
}};
constexpr int kBuiltinRate = 16000;

VoiceInfo builtin_voice_info(const BuiltinFacts& b) {
    VoiceInfo v;
    v.kind = VoiceInfo::Kind::Builtin;
    v.name = b.name;
    v.language = b.language;
    v.quality = "builtin";
    v.sample_rate = kBuiltinRate;
    v.speakers = {"0"};
    v.description = b.description;
    v.dataset = std::string("CMU ARCTIC ") + b.name;
    v.attribution_name = "CMU Flite / CMU ARCTIC";
    v.attribution_url = "http://www.festvox.org/flite/";
    v.version = "flite-2.2";
    return v;
}

const BuiltinFacts* builtin_facts(const std::string& name) {
    for (const auto& b : kBuiltin)
        if (name == b.name) return &b;
    return nullptr;
}

VoiceInfo describe_files(const piper::VoiceFiles& files) {
    return piper_voice_info(files.name, files.model_path,
                            piper::read_voice_config(files.config_path));
}

}  // namespace

VoiceInfo piper_voice_info(const std::string& name, const std::string& model_path,
                           const piper::VoiceConfig& config) {
    VoiceInfo v;
    v.kind = VoiceInfo::Kind::Piper;
    v.name = name;
    v.model_path = model_path;
    // As wyoming-piper lists a voice: its language code, else its espeak voice.
    const auto& l = config.language;
    v.language = !l.code.empty()                ? l.code
                 : !config.espeak_voice.empty() ? config.espeak_voice
                                                : name.substr(0, name.find('_'));
    v.quality = piper::to_string(config.quality);
    v.sample_rate = config.sample_rate;
    v.speakers.resize(static_cast<std::size_t>(std::max(config.num_speakers, 1)));
    for (std::size_t id = 0; id < v.speakers.size(); ++id) v.speakers[id] = std::to_string(id);
    for (const auto& [speaker, id] : config.speaker_id_map)
        if (id >= 0 && static_cast<std::size_t>(id) < v.speakers.size()) v.speakers[id] = speaker;
    v.description = l.name_english.empty() ? config.espeak_voice : l.name_english;
    if (!l.country_english.empty()) v.description += " (" + l.country_english + ")";
    v.dataset = config.dataset;
    v.attribution_name = "rhasspy";
    v.attribution_url = "https://github.com/rhasspy/piper";
    v.version = config.piper_version.empty() ? "1.0.0" : config.piper_version;
    v.length_scale = config.inference.length_scale;
    return v;
}

std::vector<VoiceInfo> Engine::list_voices() {
    std::vector<VoiceInfo> voices;
    for (const auto& b : kBuiltin) voices.push_back(builtin_voice_info(b));
    for (const auto& files : piper::list_voices()) {
        try {
            voices.push_back(describe_files(files));
        } catch (const Error& e) {
            VoiceInfo v;
            v.name = files.name;
            v.model_path = files.model_path;
            v.problem = e.what();
            voices.push_back(std::move(v));
        }
    }
    return voices;
}

std::optional<VoiceInfo> Engine::find_voice(const std::string& name_or_path) {
    if (const auto* b = builtin_facts(name_or_path)) return builtin_voice_info(*b);
    const auto files = piper::find_voice(name_or_path);
    if (!files) return std::nullopt;
    return describe_files(*files);
}

std::vector<std::string> Engine::voice_folders() {
    return piper::voice_folders();
}

}  // namespace etude::engine
