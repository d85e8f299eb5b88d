#include "speechd/speech_settings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "speechd/log.h"

namespace etude::speechd {

namespace {

bool set_int(int& field, const std::string& key, const std::string& value) {
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || v < -100 || v > 100) {
        log_line(2, "SET " + key + "='" + value + "' is not a number from -100 to 100");
        return false;
    }
    field = static_cast<int>(v);
    return true;
}

// One of the words speech-dispatcher defines for a mode (its fdsetconv.c).
bool set_word(std::string& field, const std::string& key, const std::string& value,
              std::initializer_list<std::string_view> words) {
    if (std::find(words.begin(), words.end(), value) == words.end()) {
        log_line(2, "SET " + key + "='" + value + "' is not a value speech-dispatcher defines");
        return false;
    }
    field = value;
    return true;
}

std::string unless_null(const std::string& value) {
    return value == "NULL" ? std::string() : value;
}

}  // namespace

bool SpeechSettings::apply(const std::string& key, const std::string& value) {
    if (key == "rate") return set_int(rate, key, value);
    if (key == "pitch") return set_int(pitch, key, value);
    if (key == "pitch_range") return set_int(pitch_range, key, value);
    if (key == "volume") return set_int(volume, key, value);
    if (key == "punctuation_mode")
        return set_word(punctuation_mode, key, value, {"none", "all", "some", "most"});
    if (key == "spelling_mode") return set_word(spelling_mode, key, value, {"on", "off"});
    if (key == "cap_let_recogn")
        return set_word(cap_let_recogn, key, value, {"none", "spell", "icon"});
    if (key == "voice") {
        if (value == "NULL") {
            voice_type.clear();
            return true;
        }
        return set_word(voice_type, key, value,
                        {"male1", "male2", "male3", "female1", "female2", "female3", "child_male",
                         "child_female"});
    }
    if (key == "language")
        language = unless_null(value);
    else if (key == "synthesis_voice")
        synthesis_voice = unless_null(value);
    else
        log_line(3, "SET: unknown key '" + key + "' ignored");
    return true;
}

namespace {

// "en_US" and "EN-us" alike: lower case, '-' between subtags.
std::string normal_tag(std::string tag) {
    for (char& c : tag)
        c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return tag;
}

std::string primary_subtag(const std::string& tag) {
    return tag.substr(0, tag.find('-'));
}

// The listed voice that speaks `language` best: the same tag, else the
// same language ("de" for "de-AT"); first listed first (the configured
// voices come before the installed ones). None for no match.
const ModuleVoice* voice_for_language(const std::string& language, const VoiceList& voices) {
    const std::string want = normal_tag(language);
    const ModuleVoice* same_language = nullptr;
    for (const ModuleVoice& v : voices.voices()) {
        if (v.variant != "none") continue;  // a voice's default speaker stands for it
        const std::string tag = normal_tag(v.language);
        if (tag == want) return &v;
        if (!same_language && primary_subtag(tag) == primary_subtag(want)) same_language = &v;
    }
    return same_language;
}

}  // namespace

const ModuleVoice& choose_voice(const SpeechSettings& s, const VoiceList& voices) {
    if (!s.synthesis_voice.empty())
        if (const ModuleVoice* v = voices.find(s.synthesis_voice)) return *v;
    // A language the default voice does not speak chooses a voice that does
    // (Orca sets the language of each message it reads).
    if (!s.language.empty() && primary_subtag(normal_tag(voices.default_voice().language)) !=
                                   primary_subtag(normal_tag(s.language)))
        if (const ModuleVoice* v = voice_for_language(s.language, voices)) return *v;
    // male1 is what the server sends for a client that chose no voice (its
    // default voice type, configuration.c), before every message: it means
    // the configured default, as in the published modules, which look MALE1
    // up in their voice table and fall back to their default voice.
    if (!s.voice_type.empty() && s.voice_type != "male1") {
        // Flite's voices: rms is an American man, awb a Scottish man, slt an
        // American woman; there is no child voice.
        const char* name = "slt";
        if (s.voice_type == "male3")
            name = "rms";
        else if (s.voice_type == "male2")
            name = "awb";
        if (const ModuleVoice* v = voices.find(name)) return *v;
    }
    return voices.default_voice();
}

engine::StreamOptions stream_options(const SpeechSettings& s, const ModuleVoice& voice,
                                     const std::string& backend) {
    std::optional<float> length_scale;
    if (s.rate != 0) length_scale = static_cast<float>(std::pow(3.0, -s.rate / 100.0));
    engine::StreamOptions o;
    if (voice.builtin.empty()) {
        o.voice = engine::PiperVoiceOptions{
            .piper_voice = voice.piper, .speaker = voice.speaker, .length_scale = length_scale};
        o.sample_rate = 0;  // the voice's own rate, one rate for the whole message
        o.backend = backend;
    } else {
        o.voice = engine::BuiltinVoiceOptions{.voice = voice.builtin, .length_scale = length_scale};
    }
    // Offline-style consumer: the server paces us, nobody hears a late
    // block, so never trade quality for time, and do not take real-time
    // priority from the screen reader's own threads.
    o.allow_reduced_tier = false;
    o.scheduling = engine::SchedulingClass::Network;
    return o;
}

engine::Prosody base_prosody(const SpeechSettings& s, const ModuleVoice& voice) {
    engine::Prosody p;
    if (!voice.builtin.empty()) {
        p.pitch = std::clamp(static_cast<float>(std::pow(2.0, s.pitch / 100.0)), 0.5f, 2.0f);
        p.range = static_cast<float>(std::pow(2.0, s.pitch_range / 100.0));
    }
    return p;
}

float output_gain(const SpeechSettings& s) {
    return static_cast<float>(s.volume + 100) / 100.0f;
}

bool spelling(const SpeechSettings& s) {
    return s.spelling_mode == "on";
}

}  // namespace etude::speechd
