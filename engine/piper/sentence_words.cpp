#include "engine/piper/sentence_words.h"

#include <algorithm>
#include <cstdint>

#include "engine/utf8.h"

namespace etude::piper {
namespace {

// Punctuation as Piper's phonemes and written text carry it: ASCII's, and
// the marks espeak-ng passes through or that stand between words.
bool is_punctuation(char32_t c) {
    if (c < 0x80)
        return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
               (c >= 0x7B && c <= 0x7E);
    switch (c) {
        case 0x00A1:
        case 0x00AB:
        case 0x00BB:
        case 0x00BF:  // ¡ « » ¿
        case 0x2013:
        case 0x2014:
        case 0x2026:  // – — …
        case 0x2018:
        case 0x2019:
        case 0x201C:
        case 0x201D:  // ‘ ’ “ ”
            return true;
        default:
            return false;
    }
}

// A word spoken as one word whatever its neighbours: letters and
// apostrophes only ("don't"). Digits, symbols and inner dots ("42", "3.5",
// "U.S.") can be several spoken words, or join a neighbour's.
bool is_plain_word(const std::string& word) {
    for (char32_t c : utf8::decode(word)) {
        const bool ascii_letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        const bool apostrophe = c == '\'' || c == 0x2019;
        if (!ascii_letter && !apostrophe && (c < 0x80 || is_punctuation(c))) return false;
    }
    return true;
}

bool is_space(char32_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x00A0;
}

}  // namespace

std::vector<std::size_t> phoneme_word_starts(const std::vector<std::string>& phonemes) {
    std::vector<std::size_t> starts;
    std::size_t begin = 0;
    bool spoken = false;  // the run since `begin` has a phoneme that is not punctuation
    for (std::size_t i = 0; i <= phonemes.size(); ++i) {
        if (i == phonemes.size() || phonemes[i] == " ") {
            if (spoken) starts.push_back(begin);
            begin = i + 1;
            spoken = false;
            continue;
        }
        for (char32_t c : utf8::decode(phonemes[i]))
            if (!is_punctuation(c)) spoken = true;
    }
    return starts;
}

std::vector<std::string> written_words(std::string_view text) {
    std::vector<std::string> words;
    const std::u32string cps = utf8::decode(text);
    for (std::size_t i = 0; i < cps.size();) {
        while (i < cps.size() && is_space(cps[i])) ++i;
        std::size_t end = i;
        while (end < cps.size() && !is_space(cps[end])) ++end;
        std::size_t b = i, e = end;
        while (b < e && is_punctuation(cps[b])) ++b;
        while (e > b && is_punctuation(cps[e - 1])) --e;
        if (b < e) {
            std::string word;
            for (std::size_t k = b; k < e; ++k) utf8::append(word, cps[k]);
            words.push_back(std::move(word));
        }
        i = end;
    }
    return words;
}

std::vector<engine::WordStart> pair_words(
    const std::vector<std::string>& written, const std::vector<std::size_t>& starts,
    const std::function<std::size_t(const std::string&)>& spoken_words) {
    std::vector<engine::WordStart> out;
    if (written.empty() || starts.empty()) return out;
    // Equal counts pair one to one only when no written word can be more
    // than one spoken word: else a merge elsewhere (espeak-ng puts no space
    // after a clause it ends without a mark, as at "...") could make the
    // counts agree with the words shifted.
    if (written.size() == starts.size() &&
        std::all_of(written.begin(), written.end(), is_plain_word)) {
        for (std::size_t i = 0; i < written.size(); ++i) out.push_back({written[i], starts[i]});
        return out;
    }
    std::size_t next = 0;  // the next spoken word
    for (const std::string& w : written) {
        const std::size_t n = spoken_words(w);
        if (n == 0) continue;  // e.g. a symbol espeak-ng does not read: no speech of its own
        if (next + n > starts.size()) return {};
        out.push_back({w, starts[next]});
        next += n;
    }
    if (next != starts.size()) return {};
    return out;
}

}  // namespace etude::piper
