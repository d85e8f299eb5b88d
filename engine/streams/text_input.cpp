#include "engine/streams/text_input.h"

#include <algorithm>
#include <cctype>

#include "engine/utf8.h"

namespace etude::engine {

bool has_speakable_text(std::string_view text) {
    for (unsigned char c : text)
        if (c >= 0x80 || std::isalnum(c) || std::ispunct(c)) return true;
    return false;
}

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_closer(char c) {
    return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}';
}

// A period after a common abbreviation or a single initial does not end a
// sentence ("Dr. Smith", "J. R. Smith", "e.g. this").
bool ends_with_abbreviation(std::string_view before_period) {
    std::size_t w = before_period.size();
    while (w > 0 && !is_space(before_period[w - 1]) && before_period[w - 1] != '(') --w;
    std::string word;
    for (char ch : before_period.substr(w))
        word += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]))) return true;
    static constexpr std::string_view kAbbreviations[] = {"mr", "mrs", "ms", "dr",  "prof", "st",
                                                          "sr", "jr",  "vs", "etc", "e.g",  "i.e",
                                                          "no", "fig", "mt", "inc", "ltd",  "co"};
    for (auto a : kAbbreviations)
        if (word == a) return true;
    return false;
}

// The length of the first piece of a sentence longer than max_bytes: at the
// last comma or semicolon in the second half of the limit, else at the last
// white space before it, else at a UTF-8 character boundary. It depends on
// the first max_bytes + 1 bytes only, so a sentence still arriving is cut
// where the whole one will be (engine/streams/sentence_accumulator.cpp relies on it).
std::size_t first_cut(std::string_view piece, std::size_t max_bytes) {
    for (std::size_t i = max_bytes; i > max_bytes / 2; --i)
        if (piece[i - 1] == ',' || piece[i - 1] == ';') return i;
    for (std::size_t i = max_bytes; i > 0; --i)
        if (is_space(piece[i - 1])) return i;
    const std::size_t cut = utf8::char_start_at_or_before(piece, max_bytes);
    return cut > 0 ? cut : max_bytes;  // 0 only for invalid UTF-8
}

void emit(std::vector<std::string>& out, std::string_view piece, std::size_t max_bytes) {
    while (!piece.empty()) {
        const std::size_t cut =
            piece.size() > max_bytes ? first_cut(piece, max_bytes) : piece.size();
        std::string_view head = piece.substr(0, cut);
        while (!head.empty() && is_space(head.front())) head.remove_prefix(1);
        while (!head.empty() && is_space(head.back())) head.remove_suffix(1);
        if (has_speakable_text(head)) out.emplace_back(head);
        piece.remove_prefix(cut);
    }
}

// Where the sentence that began at `start` ends if text[i] ends it (a run
// of terminators with closing quotes or brackets, then white space or the
// end of the text; or a blank line); npos otherwise.
std::size_t sentence_end_at(std::string_view text, std::size_t start, std::size_t i) {
    const char c = text[i];
    if (c == '.' || c == '!' || c == '?') {
        std::size_t j = i + 1;
        while (j < text.size() && (text[j] == '.' || text[j] == '!' || text[j] == '?')) ++j;
        while (j < text.size() && is_closer(text[j])) ++j;
        const bool single_period = j == i + 1 && c == '.';
        if ((j == text.size() || is_space(text[j])) &&
            !(single_period && ends_with_abbreviation(text.substr(start, i - start))))
            return j;
    } else if (c == '\n') {
        std::size_t j = i + 1;
        while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) ++j;
        if (j < text.size() && text[j] == '\n') return j;
    }
    return std::string_view::npos;
}

// Calls on_end(start, end) for each sentence, in order; returns where the
// text after the last end begins. `from`: no sentence ends before it.
template <typename OnEnd>
std::size_t for_each_sentence(std::string_view text, OnEnd on_end, std::size_t from = 0) {
    std::size_t start = 0;
    for (std::size_t i = from; i < text.size(); ++i) {
        const std::size_t end = sentence_end_at(text, start, i);
        if (end != std::string_view::npos) {
            on_end(start, end);
            start = end;
            i = end - 1;
        }
    }
    return start;
}

}  // namespace

std::vector<std::string> split_sentences(std::string_view text, std::size_t max_bytes) {
    std::vector<std::string> out;
    if (max_bytes < 8) max_bytes = 8;
    const std::size_t rest = for_each_sentence(text, [&](std::size_t start, std::size_t end) {
        emit(out, text.substr(start, end - start), max_bytes);
    });
    emit(out, text.substr(rest), max_bytes);
    return out;
}

std::size_t last_final_sentence_end(std::string_view text, std::size_t from) {
    std::size_t last = 0;
    // An end at the very end of the text is not final: more text may
    // continue the sentence ("3." then "5"), or the run of terminators.
    for_each_sentence(
        text,
        [&](std::size_t, std::size_t end) {
            if (end < text.size()) last = end;
        },
        std::min(from, text.size()));
    return last;
}

std::size_t no_sentence_end_before(std::string_view text) {
    std::size_t i = text.size();
    while (i > 0) {
        const char c = text[i - 1];
        if (!(is_space(c) || c == '.' || c == '!' || c == '?' || is_closer(c))) break;
        --i;
    }
    return i;
}

std::size_t long_sentence_cut(std::string_view sentence, std::size_t max_bytes) {
    if (max_bytes < 8) max_bytes = 8;
    return sentence.size() > max_bytes ? first_cut(sentence, max_bytes) : sentence.size();
}

}  // namespace etude::engine
