// SET's parameters and what they become for a stream.
#pragma once

#include <string>

#include "engine/engine.h"
#include "speechd/voice_list.h"

namespace etude::speechd {

/// The values the server sends before every message (each SET repeats all
/// of them; "NULL" means unset). Kept between messages as the reference
/// modules keep theirs.
struct SpeechSettings {
    int rate = 0, pitch = 0, pitch_range = 0, volume = 0;  // -100..100
    std::string punctuation_mode = "none";
    std::string spelling_mode = "off";
    std::string cap_let_recogn = "none";
    std::string voice_type;       // "male1" ... "child_female"; empty: unset
    std::string language;         // kept, not used to choose (see choose_voice)
    std::string synthesis_voice;  // a LIST VOICES name; empty: unset

    /// Records one "key=value" line; false (the old value stays) for a
    /// value speech-dispatcher's own modules refuse with 303: a number
    /// outside -100..100 or not a number, a punctuation, spelling,
    /// capital-letter or voice type mode it does not define. The server
    /// sends none of those. An unknown key is logged and accepted (true),
    /// where those modules refuse it: a server newer than this module may
    /// send one, and a 3xx at the end of SET makes it drop the message.
    bool apply(const std::string& key, const std::string& value);
};

/// The voice a message is spoken with: synthesis_voice when it names a
/// listed voice; else the voice type (male3 -> rms, male2 -> awb, the
/// female and child types -> slt; male1, which the server sends when the
/// client chose none, the default); else the configured default.
const ModuleVoice& choose_voice(const SpeechSettings& s, const VoiceList& voices);

/// rate -> the speaking pace, a factor of 3 either way: length_scale =
/// 3^(-rate/100) (rate 100: three times as fast, -100: three times as
/// slow; 0 leaves the voice's own pace).
/// `backend` is where a Piper voice's decoder runs (ModuleConfig::backend).
engine::StreamOptions stream_options(const SpeechSettings& s, const ModuleVoice& voice,
                                     const std::string& backend);

/// pitch -> a built-in voice's F0 times 2^(pitch/100): an octave up at 100,
/// down at -100; pitch_range -> its F0's spread about its mean times
/// 2^(pitch_range/100) (SSML <prosody> in the message applies within
/// both). A Piper voice has no pitch control: 1 for it.
engine::Prosody base_prosody(const SpeechSettings& s, const ModuleVoice& voice);

/// volume -> output gain, linear: (volume + 100) / 100 (0 silent, 1 at the
/// default 0, 2 at 100, as the espeak module's amplitude volume + 100 of
/// espeak-ng's 100), peaks that would clip eased in (to_pcm16).
float output_gain(const SpeechSettings& s);

/// spelling_mode=on: every message is spelt letter by letter.
bool spelling(const SpeechSettings& s);

}  // namespace etude::speechd
