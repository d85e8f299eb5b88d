// A Piper voice's text front end: text to sentences, each with its phonemes
// and the phoneme ids the voice's network takes (one model call each).
// For espeak voices it is Piper's own procedure: espeak-ng's IPA clause by
// clause, language-switch flags such as "(en)" removed, the clause's
// punctuation put back ("." "?" "!" closing a sentence; "," ":" ";" followed
// by a space), Unicode NFD, then one codepoint per phoneme; sentences end
// where espeak-ng says a sentence ends. Piper's "[[ phoneme ]]" blocks in the
// text are phonemes as written.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/piper/phoneme_ids.h"
#include "engine/piper/voice_config.h"
#include "engine/streams/word_start.h"

namespace etude::piper {

struct PhonemizedSentence {
    std::string text;                   // the sentence as written, trimmed
    std::vector<std::string> phonemes;  // one codepoint each (or a vowel cluster)
    PhonemeIds ids;                     // laid out ^ _ (p _)* $
    // Its written words, each starting at the index in `ids` of its first
    // phoneme (sentence_words.h); empty when they could not be paired.
    std::vector<engine::WordStart> words;
    // Closed at kMaxSentencePhonemes, not at its end: the sentence goes on
    // in the next, and no sentence silence goes between them.
    bool continued = false;
};

class Phonemizer {
  public:
    // A sentence is closed at the next clause end once it has this many
    // phonemes, so that no model call (and no wait for first audio) grows
    // with the text. Piper has no bound; sentences this long are rare.
    static constexpr std::size_t kMaxSentencePhonemes = 400;

    // Checks that the voice's phoneme type is one we can produce and that
    // espeak-ng has its voice; throws etude::Error "PATH: FIELD: what".
    explicit Phonemizer(VoiceConfig voice);

    // Sentences with at least one phoneme; none for empty or blank text.
    // Throws etude::Error for invalid UTF-8 (naming the byte offset).
    // `with_words`: pair each sentence's written and spoken words
    // (PhonemizedSentence::words), which can take an espeak-ng call per
    // written word where the counts differ; else `words` stays empty.
    std::vector<PhonemizedSentence> phonemize(std::string_view text, bool with_words = false) const;

    const VoiceConfig& voice() const { return voice_; }

  private:
    std::vector<PhonemizedSentence> phonemize_espeak(const std::string& text) const;
    std::vector<PhonemizedSentence> phonemize_codepoints(const std::string& text) const;
    PhonemizedSentence finish(std::string text, std::vector<std::string> phonemes) const;
    void pair_sentence_words(PhonemizedSentence& sentence) const;
    std::size_t spoken_words(const std::string& word) const;

    VoiceConfig voice_;
};

// Removes espeak-ng's language-switch flags: "(en)", "(fr)" around words
// read in another language (Piper: re.sub(r"\([^)]+\)", "", phonemes)).
std::string remove_language_flags(std::string_view ipa);

}  // namespace etude::piper
