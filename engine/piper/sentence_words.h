// The written words of a Piper sentence, paired with the phonemes that
// speak them: espeak-ng puts a space between the words it says, so the
// phonemes fall into words, and each written word (a run of text between
// spaces with a letter or digit in it) is one of them when the counts
// agree and every written word is letters (and apostrophes) only. Else
// (numbers, abbreviations and symbols become several spoken words; a clause
// ended without a mark, as at "...", joins two) each written word is
// phonemized alone to count its spoken words; if those do not add up to the
// sentence's, it gets no words rather than wrong ones.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/streams/word_start.h"

namespace etude::piper {

// Index of each spoken word's first phoneme: words are separated by " "
// phonemes; a run of punctuation alone is not a word.
std::vector<std::size_t> phoneme_word_starts(const std::vector<std::string>& phonemes);

// The text's words between whitespace that hold a letter or a digit, with
// the punctuation around each removed ("Hello," -> "Hello"; "don't" stays).
std::vector<std::string> written_words(std::string_view text);

// Pairs written words with spoken ones. `starts`: phoneme_word_starts() of
// the sentence; `spoken_words(word)`: how many spoken words a written word
// makes alone (asked only when the counts differ). Each result's `start`
// is the phoneme index of its first spoken word. Empty when no pairing holds.
std::vector<engine::WordStart> pair_words(
    const std::vector<std::string>& written, const std::vector<std::size_t>& starts,
    const std::function<std::size_t(const std::string&)>& spoken_words);

}  // namespace etude::piper
