#include "engine/piper/phonemizer.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/piper/espeak_session.h"
#include "engine/piper/sentence_words.h"
#include "engine/piper/unicode_text.h"
#include "engine/streams/text_input.h"
#include "engine/utf8.h"

namespace etude::piper {
namespace {

std::string trimmed(std::string_view s) {
    const char* space = " \t\r\n\f\v";
    const std::size_t b = s.find_first_not_of(space);
    if (b == std::string_view::npos) return "";
    return std::string(s.substr(b, s.find_last_not_of(space) - b + 1));
}

void append_codepoints(std::vector<std::string>& phonemes, std::string_view utf8) {
    for (char32_t c : nfd(utf8::decode(utf8))) phonemes.push_back(utf8::encode(c));
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

std::vector<PhonemizedSentence> Phonemizer::phonemize(std::string_view text,
                                                      bool with_words) const {
    if (auto bad = utf8::find_bad_sequence(text))
        throw Error("text is not valid UTF-8 (" + utf8::describe(*bad) + ")");
    // Control characters are not text; espeak-ng would read some as its own
    // commands. NUL in particular would end the C string it is given.
    std::string clean(text);
    for (char& c : clean)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') ||
            c == 0x7F)
            c = ' ';
    if (!engine::has_speakable_text(clean)) return {};
    auto sentences = voice_.phoneme_type == PhonemeType::Espeak ? phonemize_espeak(clean)
                                                                : phonemize_codepoints(clean);
    if (with_words)
        for (auto& s : sentences) pair_sentence_words(s);
    return sentences;
}

PhonemizedSentence Phonemizer::finish(std::string text, std::vector<std::string> phonemes) const {
    PhonemizedSentence s;
    s.text = trimmed(text);
    s.phonemes = merge_vowel_clusters(phonemes, voice_);
    s.ids = phonemes_to_ids(s.phonemes, voice_);
    return s;
}

void Phonemizer::pair_sentence_words(PhonemizedSentence& s) const {
    const auto starts = phoneme_word_starts(s.phonemes);
    for (auto& w : pair_words(written_words(s.text), starts,
                              [this](const std::string& word) { return spoken_words(word); }))
        s.words.push_back({std::move(w.text), s.ids.phoneme_starts[w.start]});
}

namespace {

// A sentence being built: its phonemes and where its text lies.
struct PendingSentence {
    std::size_t text_begin = 0, text_end = 0;
    std::vector<std::string> phonemes;
    bool continued = false;  // closed at kMaxSentencePhonemes, not at its end
};

// Piper's EspeakPhonemizer.phonemize for one piece of text: a sentence per
// sentence end espeak-ng reports (empty ones included, as Piper keeps them;
// they matter where a [[ phoneme block ]] follows), then what is left.
std::vector<PendingSentence> espeak_sentences(const std::string& voice, const std::string& text,
                                              std::size_t offset) {
    std::vector<PendingSentence> sentences;
    PendingSentence current;
    bool started = false;
    for (const EspeakClause& clause : EspeakSession::phonemize(voice, text)) {
        if (!started) current.text_begin = offset + clause.text_begin;
        started = true;
        current.text_end = offset + clause.text_end;
        std::string ipa = remove_language_flags(clause.phonemes);
        // A clause without words ("...", a lone "?") gets no mark: espeak-ng
        // reports none for it to Piper.
        const char mark = clause.phonemes.empty() ? 0 : clause.terminator.mark;
        if (mark) ipa += mark;
        if (mark == ',' || mark == ':' || mark == ';') ipa += ' ';
        append_codepoints(current.phonemes, ipa);
        if (clause.terminator.ends_sentence ||
            current.phonemes.size() >= Phonemizer::kMaxSentencePhonemes) {
            current.continued = !clause.terminator.ends_sentence;
            sentences.push_back(std::move(current));
            current = PendingSentence{};
            started = false;
        }
    }
    if (!current.phonemes.empty()) sentences.push_back(std::move(current));
    return sentences;
}

// Piper's raw phoneme blocks: "[[ ... ]]" on one line.
struct TextPart {
    bool raw = false;
    std::size_t begin = 0, end = 0;  // of the whole part, brackets included
};

std::vector<TextPart> split_phoneme_blocks(const std::string& text) {
    std::vector<TextPart> parts;
    std::size_t pos = 0;
    for (;;) {
        std::size_t open = text.find("[[", pos);
        std::size_t close = std::string::npos;
        // Python's re "\[\[.*?\]\]": the nearest "]]" not past a line end.
        while (open != std::string::npos) {
            close = text.find("]]", open + 2);
            const std::size_t newline = text.find('\n', open + 2);
            if (close != std::string::npos && (newline == std::string::npos || close < newline))
                break;
            open = text.find("[[", open + 1);
        }
        if (open == std::string::npos) break;
        parts.push_back({false, pos, open});
        parts.push_back({true, open, close + 2});
        pos = close + 2;
    }
    parts.push_back({false, pos, text.size()});
    return parts;
}

bool is_python_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

}  // namespace

// How many words a written word makes spoken alone: asked by pair_words()
// only for a sentence whose written and spoken word counts differ.
std::size_t Phonemizer::spoken_words(const std::string& word) const {
    std::vector<std::string> phonemes;
    if (voice_.phoneme_type != PhonemeType::Espeak) {
        append_codepoints(phonemes, word);
    } else {
        for (PendingSentence& s : espeak_sentences(voice_.espeak_voice, word, 0)) {
            if (!phonemes.empty()) phonemes.push_back(" ");
            phonemes.insert(phonemes.end(), s.phonemes.begin(), s.phonemes.end());
        }
    }
    return phoneme_word_starts(phonemes).size();
}

// Piper's PiperVoice.phonemize: text and [[ phoneme ]] blocks in turn; a
// block's phonemes are its characters as written (no NFD), joined to the
// sentence before it, and the text after a block continues that sentence.
std::vector<PhonemizedSentence> Phonemizer::phonemize_espeak(const std::string& text) const {
    const std::vector<TextPart> parts = split_phoneme_blocks(text);
    std::vector<PendingSentence> sentences;
    bool previous_raw = false;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        const TextPart& part = parts[i];
        if (part.raw) {
            previous_raw = true;
            if (sentences.empty()) sentences.push_back({part.begin, part.begin, {}});
            PendingSentence& s = sentences.back();
            s.text_end = part.end;
            if (i > 0 && parts[i - 1].end > parts[i - 1].begin && text[part.begin - 1] == ' ')
                s.phonemes.push_back(" ");
            std::size_t b = part.begin + 2, e = part.end - 2;
            while (b < e && is_python_space(text[b])) ++b;
            while (e > b && is_python_space(text[e - 1])) --e;
            for (char32_t c : utf8::decode(std::string_view(text).substr(b, e - b)))
                s.phonemes.push_back(utf8::encode(c));
            if (i + 1 < parts.size() && parts[i + 1].end > parts[i + 1].begin &&
                text[part.end] == ' ')
                s.phonemes.push_back(" ");
            continue;
        }
        std::vector<PendingSentence> more = espeak_sentences(
            voice_.espeak_voice, text.substr(part.begin, part.end - part.begin), part.begin);
        std::size_t first = 0;
        if (previous_raw && !more.empty()) {
            PendingSentence& s = sentences.back();
            s.phonemes.insert(s.phonemes.end(), more[0].phonemes.begin(), more[0].phonemes.end());
            s.text_end = std::max(s.text_end, more[0].text_end);
            first = 1;
        }
        for (std::size_t k = first; k < more.size(); ++k) sentences.push_back(std::move(more[k]));
        previous_raw = false;
    }
    std::vector<PhonemizedSentence> out;
    for (PendingSentence& s : sentences)
        if (!s.phonemes.empty()) {
            out.push_back(finish(text.substr(s.text_begin, s.text_end - s.text_begin),
                                 std::move(s.phonemes)));
            out.back().continued = s.continued;
        }
    return out;
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
