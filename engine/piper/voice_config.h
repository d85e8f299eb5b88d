// A Piper voice's configuration, VOICE.onnx.json, read as Piper's own
// runtime reads it (piper/config.py) but strictly: every field is checked
// and a bad one is reported in one line naming the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace etude::piper {

// How a voice's text becomes phonemes (Piper's "phoneme_type").
enum class PhonemeType { Espeak, Text, Pinyin, Hebrew, Japanese, Thai };
const char* to_string(PhonemeType type);

// The four sizes Piper publishes; Unknown when the file does not say.
enum class VoiceQuality { Unknown, XLow, Low, Medium, High };
const char* to_string(VoiceQuality quality);

// Piper's synthesis defaults (the "inference" object).
struct InferenceScales {
    float noise_scale = 0.667f;
    float length_scale = 1.0f;
    float noise_w = 0.8f;
};

// The "language" object: descriptive only, every field optional.
struct VoiceLanguage {
    std::string code;  // "en_US"
    std::string family;
    std::string region;
    std::string name_native;
    std::string name_english;
    std::string country_english;
};

struct VoiceConfig {
    std::string path;  // the file it was read from, for error messages

    int sample_rate = 0;
    VoiceQuality quality = VoiceQuality::Unknown;
    std::string espeak_voice;  // "en-us"
    PhonemeType phoneme_type = PhonemeType::Espeak;
    // Phoneme (one or more codepoints, UTF-8) -> ids; each id < num_symbols.
    std::map<std::string, std::vector<std::int64_t>> phoneme_id_map;
    int num_symbols = 0;
    int num_speakers = 1;
    std::map<std::string, int> speaker_id_map;  // name -> id < num_speakers
    int default_speaker_id = 0;
    InferenceScales inference;
    int hop_length = 256;
    // Vowel clusters to merge into one phoneme ("a","ɪ" -> "aɪ"), in order of
    // the file; each cluster's joined form is in phoneme_id_map.
    std::vector<std::vector<std::string>> vowel_clusters;
    VoiceLanguage language;
    std::string dataset;
    std::string piper_version;

    // The ids of the three markers Piper lays a sentence out with:
    // ^ (start), _ (pad, after every phoneme) and $ (end).
    const std::vector<std::int64_t>& ids_of(const std::string& phoneme) const;
    // A speaker by name (speaker_id_map) or, failing that, by number;
    // throws etude::Error naming the voice when there is no such speaker.
    int speaker_id(const std::string& name_or_id) const;
};

// Bounds of the checks, stated once (docs/voices.md quotes them).
inline constexpr int kMinSampleRate = 8000;
inline constexpr int kMaxSampleRate = 192000;
inline constexpr int kMaxSymbols = 65536;
inline constexpr int kMaxSpeakers = 10000;

// Reads and checks VOICE.onnx.json. Throws etude::Error "PATH: FIELD: what".
VoiceConfig read_voice_config(const std::string& path);
// The same from text already read; label names the source in errors.
VoiceConfig parse_voice_config(const std::string& json_text, const std::string& label);

}  // namespace etude::piper
