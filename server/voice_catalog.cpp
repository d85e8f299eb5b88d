#include "server/voice_catalog.h"

#include <algorithm>
#include <cctype>

#include "engine/piper/voice_catalog.h"
#include "engine/piper/voice_config.h"

namespace etude::server {

namespace {

// "en-US", "en_us" and "EN_US" name one language; "en" matches any English.
std::string normalise_language(const std::string& s) {
    std::string out;
    for (char c : s)
        out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

VoiceCatalog VoiceCatalog::builtin() {
    VoiceCatalog c;
    struct Builtin {
        const char* name;
        const char* language;
        const char* description;
    };
    // Flite's clustergen voices from the CMU ARCTIC databases, vocoded by
    // LibEtude's MLSA vocoder at their own 16 kHz.
    static constexpr Builtin kVoices[] = {
        {"slt", "en_US", "US English female (CMU ARCTIC slt), Flite front end, LibEtude vocoder"},
        {"rms", "en_US", "US English male (CMU ARCTIC rms), Flite front end, LibEtude vocoder"},
        {"awb", "en_GB",
         "Scottish English male (CMU ARCTIC awb), Flite front end, LibEtude vocoder"},
    };
    for (const auto& b : kVoices) {
        VoiceEntry e;
        e.name = b.name;
        e.languages = {b.language};
        e.description = b.description;
        e.attribution_name = "CMU Flite / CMU ARCTIC";
        e.attribution_url = "http://www.festvox.org/flite/";
        e.version = "flite-2.2";
        e.options.voice = b.name;
        e.options.sample_rate = 16000.0;
        c.add(std::move(e));
    }
    return c;
}

VoiceEntry VoiceCatalog::piper_voice(const std::string& name_or_path) {
    const auto files = piper::require_voice(name_or_path);
    const auto config = piper::read_voice_config(files.config_path);
    VoiceEntry e;
    e.name = files.name;
    // As wyoming-piper lists a voice: its language code, else its espeak voice.
    e.languages = {!config.language.code.empty()  ? config.language.code
                   : !config.espeak_voice.empty() ? config.espeak_voice
                                                  : files.name.substr(0, files.name.find('_'))};
    if (config.num_speakers > 1) {
        // By id, named where the voice names them (as Piper's speaker_id_map).
        e.speakers.resize(static_cast<std::size_t>(config.num_speakers));
        for (std::size_t id = 0; id < e.speakers.size(); ++id) e.speakers[id] = std::to_string(id);
        for (const auto& [name, id] : config.speaker_id_map) e.speakers[id] = name;
    }
    e.description = "Piper voice " + files.name + " (" + piper::to_string(config.quality) +
                    ", VITS, " + std::to_string(config.sample_rate) + " Hz)";
    e.attribution_name = "rhasspy";
    e.attribution_url = "https://github.com/rhasspy/piper";
    e.version = config.piper_version.empty() ? "1.0.0" : config.piper_version;
    e.options.piper_voice = files.model_path;
    e.options.sample_rate = config.sample_rate;
    e.length_scale = config.inference.length_scale;
    return e;
}

void VoiceCatalog::add(VoiceEntry entry) {
    if (entry.name.empty()) throw Error("a server voice needs a name");
    if (by_name(entry.name)) throw Error("two server voices are called '" + entry.name + "'");
    voices_.push_back(std::move(entry));
}

const VoiceEntry& VoiceCatalog::default_voice() const {
    if (voices_.empty()) throw Error("the server has no voices");
    return voices_.front();
}

const VoiceEntry* VoiceCatalog::by_name(const std::string& name) const {
    for (const auto& v : voices_)
        if (v.name == name) return &v;
    return nullptr;
}

const VoiceEntry* VoiceCatalog::by_language(const std::string& language) const {
    const auto want = normalise_language(language);
    if (want.empty()) return nullptr;
    for (const auto& v : voices_)
        for (const auto& l : v.languages)
            if (normalise_language(l) == want) return &v;
    for (const auto& v : voices_)
        for (const auto& l : v.languages) {
            const auto have = normalise_language(l);
            if (have.rfind(want + "_", 0) == 0) return &v;
        }
    return nullptr;
}

}  // namespace etude::server
