#include "engine/piper/voice_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"
#include "engine/piper/json_error.h"
#include "engine/utf8.h"

namespace etude::piper {
namespace {

using Json = nlohmann::json;

// Checks one JSON object's fields; every failure names the file and the
// field's full path ("audio.sample_rate").
class FieldReader {
  public:
    explicit FieldReader(std::string label) : label_(std::move(label)) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw Error(label_ + ": " + field + ": " + what);
    }
    const Json* find(const Json& obj, const std::string& /*path*/, const char* key) const {
        auto it = obj.find(key);
        return it == obj.end() || it->is_null() ? nullptr : &*it;
    }
    const Json& require(const Json& obj, const std::string& path, const char* key) const {
        const Json* v = find(obj, path, key);
        if (!v) fail(path + key, "is missing");
        return *v;
    }
    const Json& object(const Json& v, const std::string& field) const {
        if (!v.is_object()) fail(field, "must be a JSON object");
        return v;
    }
    long long integer(const Json& v, const std::string& field, long long lo, long long hi) const {
        if (!v.is_number_integer()) fail(field, "must be a whole number, not " + describe(v));
        const long long x = v.is_number_unsigned() && v.get<unsigned long long>() > 1ull << 62
                                ? hi + 1
                                : v.get<long long>();
        if (x < lo || x > hi)
            fail(field,
                 "is " + v.dump() + ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
        return x;
    }
    double number(const Json& v, const std::string& field) const {
        if (!v.is_number()) fail(field, "must be a number, not " + describe(v));
        const double x = v.get<double>();
        if (!std::isfinite(x)) fail(field, "must be finite");
        return x;
    }
    std::string text(const Json& v, const std::string& field) const {
        if (!v.is_string()) fail(field, "must be a string, not " + describe(v));
        std::string s = v.get<std::string>();
        if (auto bad = utf8::find_bad_sequence(s))
            fail(field, "is not valid UTF-8 (" + utf8::describe(*bad) + ")");
        return s;
    }
    std::string optional_text(const Json& obj, const std::string& path, const char* key) const {
        const Json* v = find(obj, path, key);
        return v ? text(*v, path + key) : std::string();
    }

    static std::string describe(const Json& v) {
        if (v.is_string()) return "the string " + v.dump();
        if (v.is_number_float()) return "the number " + v.dump();
        return std::string(v.type_name());
    }

  private:
    std::string label_;
};

PhonemeType phoneme_type_of(const FieldReader& r, const std::string& s) {
    for (PhonemeType t : {PhonemeType::Espeak, PhonemeType::Text, PhonemeType::Pinyin,
                          PhonemeType::Hebrew, PhonemeType::Japanese, PhonemeType::Thai})
        if (s == to_string(t)) return t;
    r.fail("phoneme_type",
           "is '" + s + "', expected one of espeak, text, pinyin, hebrew, japanese, thai");
}

VoiceQuality quality_of(const FieldReader& r, const std::string& s) {
    for (VoiceQuality q :
         {VoiceQuality::XLow, VoiceQuality::Low, VoiceQuality::Medium, VoiceQuality::High})
        if (s == to_string(q)) return q;
    r.fail("audio.quality", "is '" + s + "', expected one of x_low, low, medium, high");
}

float scale(const FieldReader& r, const Json& inference, const char* key, float fallback,
            bool zero_allowed) {
    const Json* v = r.find(inference, "inference.", key);
    if (!v) return fallback;
    const std::string field = std::string("inference.") + key;
    const double x = r.number(*v, field);
    // Bounds well past any sensible setting, so a typo is caught before it
    // turns into a minute-long phoneme or noise that drowns the voice.
    if (x < 0 || (!zero_allowed && x == 0) || x > 100)
        r.fail(field, "is " + v->dump() +
                          (zero_allowed ? ", expected 0..100" : ", expected above 0, up to 100"));
    return static_cast<float>(x);
}

}  // namespace

const char* to_string(PhonemeType type) {
    switch (type) {
        case PhonemeType::Espeak:
            return "espeak";
        case PhonemeType::Text:
            return "text";
        case PhonemeType::Pinyin:
            return "pinyin";
        case PhonemeType::Hebrew:
            return "hebrew";
        case PhonemeType::Japanese:
            return "japanese";
        case PhonemeType::Thai:
            return "thai";
    }
    return "?";
}

const char* to_string(VoiceQuality quality) {
    switch (quality) {
        case VoiceQuality::Unknown:
            return "unknown";
        case VoiceQuality::XLow:
            return "x_low";
        case VoiceQuality::Low:
            return "low";
        case VoiceQuality::Medium:
            return "medium";
        case VoiceQuality::High:
            return "high";
    }
    return "?";
}

const std::vector<std::int64_t>& VoiceConfig::ids_of(const std::string& phoneme) const {
    auto it = phoneme_id_map.find(phoneme);
    if (it == phoneme_id_map.end())
        throw Error(path + ": phoneme_id_map: has no entry for '" + phoneme + "'");
    return it->second;
}

int VoiceConfig::speaker_id(const std::string& name_or_id) const {
    if (auto it = speaker_id_map.find(name_or_id); it != speaker_id_map.end()) return it->second;
    const bool numeric = !name_or_id.empty() && name_or_id.size() <= 9 &&
                         name_or_id.find_first_not_of("0123456789") == std::string::npos;
    if (numeric) {
        const int id = std::stoi(name_or_id);
        if (id < num_speakers) return id;
        throw Error(path + ": speaker " + name_or_id + " does not exist (the voice has " +
                    std::to_string(num_speakers) + " speaker" + (num_speakers == 1 ? "" : "s") +
                    ", ids 0.." + std::to_string(num_speakers - 1) + ")");
    }
    std::string names;
    int listed = 0;
    for (const auto& [name, id] : speaker_id_map) {
        if (listed++ == 8) {
            names += ", ...";
            break;
        }
        names += (names.empty() ? "" : ", ") + name;
    }
    throw Error(path + ": speaker '" + name_or_id + "' does not exist" +
                (names.empty() ? std::string(" (the voice names no speakers; give an id 0.." +
                                             std::to_string(num_speakers - 1) + ")")
                               : " (speakers: " + names + ")"));
}

VoiceConfig parse_voice_config(const std::string& json_text, const std::string& label) {
    const FieldReader r(label);
    Json root;
    try {
        root = Json::parse(json_text);
    } catch (const Json::exception& e) {
        // nlohmann's message says where the text stopped making sense; a
        // file cut short ends "unexpected end of input". (Also a number
        // past a double's range, out_of_range rather than parse_error.)
        throw Error(label + ": not valid JSON (" + json_error_reason(e) + ")");
    }
    if (!root.is_object()) r.fail("(top level)", "must be a JSON object");

    VoiceConfig c;
    c.path = label;

    const Json& audio = r.object(r.require(root, "", "audio"), "audio");
    c.sample_rate =
        static_cast<int>(r.integer(r.require(audio, "audio.", "sample_rate"), "audio.sample_rate",
                                   kMinSampleRate, kMaxSampleRate));
    if (const Json* q = r.find(audio, "audio.", "quality"))
        c.quality = quality_of(r, r.text(*q, "audio.quality"));

    if (const Json* t = r.find(root, "", "phoneme_type"))
        c.phoneme_type = phoneme_type_of(r, r.text(*t, "phoneme_type"));

    // Piper's runtime reads espeak.voice for every phoneme type.
    const Json& espeak = r.object(r.require(root, "", "espeak"), "espeak");
    c.espeak_voice = r.text(r.require(espeak, "espeak.", "voice"), "espeak.voice");
    if (c.espeak_voice.empty()) r.fail("espeak.voice", "is empty");
    if (c.espeak_voice.find_first_of(" \t\n\r\"'") != std::string::npos)
        r.fail("espeak.voice", "'" + c.espeak_voice + "' is not a voice name");

    c.num_symbols = static_cast<int>(
        r.integer(r.require(root, "", "num_symbols"), "num_symbols", 1, kMaxSymbols));
    c.num_speakers = static_cast<int>(
        r.integer(r.require(root, "", "num_speakers"), "num_speakers", 1, kMaxSpeakers));

    const Json& id_map = r.object(r.require(root, "", "phoneme_id_map"), "phoneme_id_map");
    for (const auto& [phoneme, ids] : id_map.items()) {
        const std::string field = "phoneme_id_map[\"" + phoneme + "\"]";
        if (phoneme.empty()) r.fail(field, "an empty phoneme");
        if (auto bad = utf8::find_bad_sequence(phoneme))
            r.fail("phoneme_id_map", "a key is not UTF-8 (" + utf8::describe(*bad) + ")");
        if (!ids.is_array() || ids.empty()) r.fail(field, "must be a non-empty list of ids");
        std::vector<std::int64_t>& out = c.phoneme_id_map[phoneme];
        for (const Json& id : ids) out.push_back(r.integer(id, field, 0, c.num_symbols - 1));
    }
    for (const char* marker : {"^", "_", "$"})
        if (!c.phoneme_id_map.count(marker))
            r.fail("phoneme_id_map", std::string("has no '") + marker +
                                         "' (Piper lays out every sentence as ^ _ (phoneme _)* $)");

    if (const Json* s = r.find(root, "", "speaker_id_map")) {
        r.object(*s, "speaker_id_map");
        if (s->size() > static_cast<std::size_t>(c.num_speakers))
            r.fail("speaker_id_map", "names " + std::to_string(s->size()) +
                                         " speakers but num_speakers is " +
                                         std::to_string(c.num_speakers));
        for (const auto& [name, id] : s->items()) {
            if (name.empty()) r.fail("speaker_id_map", "has an empty speaker name");
            c.speaker_id_map[name] = static_cast<int>(
                r.integer(id, "speaker_id_map[\"" + name + "\"]", 0, c.num_speakers - 1));
        }
    }
    if (const Json* d = r.find(root, "", "default_speaker_id"))
        c.default_speaker_id =
            static_cast<int>(r.integer(*d, "default_speaker_id", 0, c.num_speakers - 1));

    if (const Json* inf = r.find(root, "", "inference")) {
        r.object(*inf, "inference");
        c.inference.noise_scale = scale(r, *inf, "noise_scale", c.inference.noise_scale, true);
        c.inference.length_scale = scale(r, *inf, "length_scale", c.inference.length_scale, false);
        c.inference.noise_w = scale(r, *inf, "noise_w", c.inference.noise_w, true);
    }
    if (const Json* h = r.find(root, "", "hop_length"))
        c.hop_length = static_cast<int>(r.integer(*h, "hop_length", 1, 4096));

    if (const Json* vc = r.find(root, "", "vowel_clusters")) {
        if (!vc->is_array()) r.fail("vowel_clusters", "must be a list of lists of phonemes");
        for (const Json& cluster : *vc) {
            if (!cluster.is_array() || cluster.size() < 2)
                r.fail("vowel_clusters", "each cluster must list two or more phonemes");
            std::vector<std::string> parts;
            std::string joined;
            for (const Json& p : cluster) {
                parts.push_back(r.text(p, "vowel_clusters"));
                joined += parts.back();
            }
            if (!c.phoneme_id_map.count(joined))
                r.fail("vowel_clusters", "cluster '" + joined + "' is not in phoneme_id_map");
            c.vowel_clusters.push_back(std::move(parts));
        }
    }

    if (const Json* lang = r.find(root, "", "language")) {
        r.object(*lang, "language");
        c.language.code = r.optional_text(*lang, "language.", "code");
        c.language.family = r.optional_text(*lang, "language.", "family");
        c.language.region = r.optional_text(*lang, "language.", "region");
        c.language.name_native = r.optional_text(*lang, "language.", "name_native");
        c.language.name_english = r.optional_text(*lang, "language.", "name_english");
        c.language.country_english = r.optional_text(*lang, "language.", "country_english");
    }
    c.dataset = r.optional_text(root, "", "dataset");
    c.piper_version = r.optional_text(root, "", "piper_version");
    return c;
}

VoiceConfig read_voice_config(const std::string& path) {
    if (!std::filesystem::is_regular_file(path))
        throw Error(path + (std::filesystem::exists(path) ? ": not a file" : ": no such file"));
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(path + ": cannot open the voice config");
    // A config is a few kilobytes; a huge file is not one and is not read.
    if (in.tellg() > std::streamoff(16 << 20)) throw Error(path + ": too large for a voice config");
    in.seekg(0);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error(path + ": cannot read the voice config");
    return parse_voice_config(text.str(), path);
}

}  // namespace etude::piper
