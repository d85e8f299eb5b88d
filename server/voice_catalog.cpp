#include "server/voice_catalog.h"

#include <algorithm>
#include <cctype>

namespace etude::server {

namespace {

// "en-US", "en_us" and "EN_US" name one language; "en" matches any English.
std::string normalise_language(const std::string& s) {
    std::string out;
    for (char c : s)
        out += c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// A server voice from the engine's facts: a voice's description as clients
// see it is what it is made with (the built-in voices: Flite's front end and
// LibEtude's vocoder; Piper voices: VITS) beside who speaks.
VoiceEntry entry_of(const engine::VoiceInfo& v) {
    VoiceEntry e;
    e.name = v.name;
    e.languages = {v.language};
    if (v.speakers.size() > 1) e.speakers = v.speakers;  // by id, named where the voice names them
    e.attribution_name = v.attribution_name;
    e.attribution_url = v.attribution_url;
    e.version = v.version;
    e.options.sample_rate = v.sample_rate;
    e.length_scale = v.length_scale;
    if (v.kind == engine::VoiceInfo::Kind::Builtin) {
        e.description = v.description + " (" + v.dataset + "), Flite front end, LibEtude vocoder";
        e.options.voice = engine::BuiltinVoiceOptions{.voice = v.name};
    } else {
        e.description = "Piper voice " + v.name + " (" + v.quality + ", VITS, " +
                        std::to_string(v.sample_rate) + " Hz)";
        e.options.voice = engine::PiperVoiceOptions{.piper_voice = v.model_path};
    }
    return e;
}

}  // namespace

bool VoiceEntry::has_speaker(const std::string& speaker) const {
    if (std::find(speakers.begin(), speakers.end(), speaker) != speakers.end()) return true;
    const bool numeric = !speaker.empty() && speaker.size() <= 9 &&
                         speaker.find_first_not_of("0123456789") == std::string::npos;
    return numeric && std::stoul(speaker) < speakers.size();
}

VoiceCatalog VoiceCatalog::builtin() {
    VoiceCatalog c;
    for (const auto& v : engine::Engine::list_voices())
        if (v.kind == engine::VoiceInfo::Kind::Builtin) c.add(entry_of(v));
    return c;
}

VoiceEntry VoiceCatalog::piper_voice(const std::string& name_or_path) {
    const auto voice = engine::Engine::find_voice(name_or_path);
    // None: the engine's own error, which names the folders it searched.
    if (!voice) (void)engine::Engine::describe_voice(name_or_path);
    if (!voice || voice->kind != engine::VoiceInfo::Kind::Piper)
        throw Error("'" + name_or_path + "' is not a Piper voice");
    return entry_of(*voice);
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
