#include "engine/piper/phonemizer.h"

#include "engine/error.h"
#include "engine/piper/espeak_session.h"
#include "engine/piper/unicode_text.h"
#include "engine/text_input.h"

namespace etude::piper {
namespace {

std::string trimmed(std::string_view s) {
    const char* space = " \t\r\n\f\v";
    const std::size_t b = s.find_first_not_of(space);
    if (b == std::string_view::npos) return "";
    return std::string(s.substr(b, s.find_last_not_of(space) - b + 1));
}

void append_codepoints(std::vector<std::string>& phonemes, std::string_view utf8) {
    for (char32_t c : nfd(utf8_to_codepoints(utf8))) phonemes.push_back(codepoint_to_utf8(c));
}

}  // namespace

std::string remove_language_flags(std::string_view ipa) {
    std::string out;
    out.reserve(ipa.size());
    for (std::size_t i = 0; i < ipa.size(); ++i) {
        if (ipa[i] == '(') {
            const std::size_t close = ipa.find(')', i + 1);
            // "(" then at least one character that is not ")" then ")".
            if (close != std::string_view::npos && close > i + 1) {
                i = close;
                continue;
            }
        }
        out += ipa[i];
    }
    return out;
}

Phonemizer::Phonemizer(VoiceConfig voice) : voice_(std::move(voice)) {
    switch (voice_.phoneme_type) {
        case PhonemeType::Espeak:
            if (!EspeakSession::available())
                throw Error(voice_.path +
                            ": phoneme_type: espeak, but this build has no espeak-ng "
                            "(ETUDE_WITH_ESPEAK=OFF); only phoneme ids can be spoken");
            if (!EspeakSession::voice_exists(voice_.espeak_voice))
                throw Error(voice_.path + ": espeak.voice: '" + voice_.espeak_voice +
                            "' is not an espeak-ng voice (list them: espeak-ng --voices)");
            break;
        case PhonemeType::Text:
            break;
        default:
            throw Error(voice_.path + ": phoneme_type: '" + to_string(voice_.phoneme_type) +
                        "' needs Piper's own phonemizer for that language, which LibEtude does "
                        "not have (espeak and text voices are supported)");
    }
}

std::vector<PhonemizedSentence> Phonemizer::phonemize(std::string_view text) const {
    if (auto bad = engine::find_invalid_utf8(text))
        throw Error("text is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    // Control characters are not text; espeak-ng would read some as its own
    // commands. NUL in particular would end the C string it is given.
    std::string clean(text);
    for (char& c : clean)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') ||
            c == 0x7F)
            c = ' ';
    if (!engine::has_speakable_text(clean)) return {};
    return voice_.phoneme_type == PhonemeType::Espeak ? phonemize_espeak(clean)
                                                      : phonemize_codepoints(clean);
}

PhonemizedSentence Phonemizer::finish(std::string text, std::vector<std::string> phonemes) const {
    PhonemizedSentence s;
    s.text = trimmed(text);
    s.phonemes = merge_vowel_clusters(phonemes, voice_);
    s.ids = phonemes_to_ids(s.phonemes, voice_);
    return s;
}

std::vector<PhonemizedSentence> Phonemizer::phonemize_espeak(const std::string& text) const {
    std::vector<PhonemizedSentence> sentences;
    std::vector<std::string> phonemes;
    std::size_t sentence_begin = 0, sentence_end = 0;
    auto close = [&] {
        if (!phonemes.empty())
            sentences.push_back(finish(text.substr(sentence_begin, sentence_end - sentence_begin),
                                       std::move(phonemes)));
        phonemes.clear();
    };
    for (const EspeakClause& clause : EspeakSession::phonemize(voice_.espeak_voice, text)) {
        if (phonemes.empty()) sentence_begin = clause.text_begin;
        sentence_end = clause.text_end;
        std::string ipa = remove_language_flags(clause.phonemes);
        // A clause without words ("...", a lone "?") gets no mark: espeak-ng
        // reports none for it to Piper.
        const char mark = clause.phonemes.empty() ? 0 : clause.terminator.mark;
        if (mark) ipa += mark;
        if (mark == ',' || mark == ':' || mark == ';') ipa += ' ';
        append_codepoints(phonemes, ipa);
        if (clause.terminator.ends_sentence || phonemes.size() >= kMaxSentencePhonemes) close();
    }
    close();
    return sentences;
}

// phoneme_type "text": the phonemes are the text's own codepoints (NFD).
// Piper makes the whole text one sentence; we split it where
// engine::split_sentences does, so long texts stay bounded.
std::vector<PhonemizedSentence> Phonemizer::phonemize_codepoints(const std::string& text) const {
    std::vector<PhonemizedSentence> sentences;
    for (const std::string& piece : engine::split_sentences(text, kMaxSentencePhonemes)) {
        std::vector<std::string> phonemes;
        append_codepoints(phonemes, piece);
        if (!phonemes.empty()) sentences.push_back(finish(piece, std::move(phonemes)));
    }
    return sentences;
}

}  // namespace etude::piper
