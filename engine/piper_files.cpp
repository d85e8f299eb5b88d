// engine/piper_files.h over the Piper front end of engine/piper/: the voice
// catalog and configs, the --json-input format, phoneme ids, the phonemizer.
#include "engine/piper_files.h"

#include "engine/error.h"
#include "engine/piper/json_input.h"
#include "engine/piper/phoneme_ids.h"
#include "engine/piper/phonemizer.h"
#include "engine/piper/voice_catalog.h"
#include "engine/piper/voice_config.h"

namespace etude::engine {
namespace {

// "English (United States), en_US, medium, 22050 Hz, 1 speaker"
std::string summarize(const piper::VoiceConfig& c) {
    const auto& l = c.language;
    std::string text = l.name_english.empty() ? c.espeak_voice : l.name_english;
    if (!l.country_english.empty()) text += " (" + l.country_english + ")";
    if (!l.code.empty()) text += ", " + l.code;
    text += std::string(", ") + piper::to_string(c.quality) + ", " + std::to_string(c.sample_rate) +
            " Hz, " + std::to_string(c.num_speakers) +
            (c.num_speakers == 1 ? " speaker" : " speakers");
    if (!c.speaker_id_map.empty()) {
        std::string names;
        int shown = 0;
        for (const auto& [name, id] : c.speaker_id_map) {
            if (shown++ == 5) {
                names += ", ...";
                break;
            }
            names += (names.empty() ? "" : ", ") + name;
        }
        text += " (" + names + ")";
    }
    return text;
}

// How PiperVoiceOptions::speaker names speaker `id`: by its name where the
// voice names it (a number could be another speaker's name), else by number.
std::string speaker_name(const piper::VoiceConfig& voice, int id) {
    for (const auto& [name, i] : voice.speaker_id_map)
        if (i == id) return name;
    return std::to_string(id);
}

}  // namespace

std::vector<PiperVoiceSummary> summarize_piper_voices() {
    std::vector<PiperVoiceSummary> voices;
    for (const auto& v : piper::list_voices()) {
        PiperVoiceSummary s{v.name, v.model_path, v.model_present, {}, {}};
        try {
            s.summary = summarize(piper::read_voice_config(v.config_path));
        } catch (const std::exception& e) {
            s.problem = e.what();
        }
        voices.push_back(std::move(s));
    }
    return voices;
}

std::vector<PiperInputRun> read_piper_json_input(std::string_view input, const std::string& voice,
                                                 const std::string& speaker,
                                                 const std::string& source) {
    const auto config = piper::read_voice_config(piper::require_voice(voice).config_path);
    const int fallback = speaker.empty() ? config.default_speaker_id : config.speaker_id(speaker);
    std::vector<PiperInputRun> runs;
    std::size_t number = 0, begin = 0;
    while (begin < input.size()) {
        std::size_t end = input.find('\n', begin);
        if (end == std::string_view::npos) end = input.size();
        const std::string_view line = input.substr(begin, end - begin);
        begin = end + 1;
        ++number;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const auto parsed =
            piper::parse_json_input_line(line, source + ":" + std::to_string(number));
        const std::string who = speaker_name(config, piper::speaker_for(parsed, config, fallback));
        if (runs.empty() || runs.back().speaker != who) runs.push_back({who, {}});
        auto& items = runs.back().items;
        if (parsed.phoneme_ids) {
            piper::check_phoneme_ids(*parsed.phoneme_ids, config);
            items.emplace_back(*parsed.phoneme_ids);
        } else {
            items.emplace_back(parsed.text.value_or(""));
        }
    }
    return runs;
}

struct PiperPhonemizer::Impl {
    piper::Phonemizer phonemizer;
};

PiperPhonemizer::PiperPhonemizer(const std::string& voice)
    : impl_(std::make_unique<Impl>(Impl{
          piper::Phonemizer(piper::read_voice_config(piper::require_voice(voice).config_path))})) {}
PiperPhonemizer::~PiperPhonemizer() = default;
PiperPhonemizer::PiperPhonemizer(PiperPhonemizer&&) noexcept = default;
PiperPhonemizer& PiperPhonemizer::operator=(PiperPhonemizer&&) noexcept = default;

std::vector<PiperSentencePhonemes> PiperPhonemizer::phonemize(const std::string& text) const {
    std::vector<PiperSentencePhonemes> sentences;
    for (auto& s : impl_->phonemizer.phonemize(text))
        sentences.push_back({std::move(s.text), std::move(s.phonemes), std::move(s.ids.ids),
                             s.ids.missing, std::move(s.ids.missing_phonemes)});
    return sentences;
}

}  // namespace etude::engine
