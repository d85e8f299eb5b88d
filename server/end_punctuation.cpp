#include "server/end_punctuation.h"

#include <stdexcept>

namespace etude::server {
namespace {

bool is_continuation(char c) {
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// The length of the UTF-8 sequence a lead byte begins; 0 if it is none.
std::size_t sequence_length(char lead) {
    const auto b = static_cast<unsigned char>(lead);
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

// How many bytes of white space end `text`: ASCII's, and the no-break and
// ideographic spaces Python's strip() takes too.
std::size_t trailing_space(std::string_view text) {
    std::size_t n = 0;
    for (;;) {
        const std::string_view rest = text.substr(0, text.size() - n);
        if (rest.empty()) return n;
        const char c = rest.back();
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v')
            n += 1;
        else if (rest.ends_with("\xc2\xa0"))  // U+00A0
            n += 2;
        else if (rest.ends_with("\xe3\x80\x80"))  // U+3000
            n += 3;
        else
            return n;
    }
}

// How many bytes at the end of `text` begin a character the text does not
// finish (a piece cut inside one).
std::size_t unfinished_character(std::string_view text) {
    for (std::size_t back = 1; back <= 4 && back <= text.size(); ++back) {
        const char c = text[text.size() - back];
        if (is_continuation(c)) continue;
        return sequence_length(c) > back ? back : 0;
    }
    return 0;
}

// The last character of `text` (its whole UTF-8 sequence).
std::string_view last_character(std::string_view text) {
    std::size_t start = text.size();
    while (start > 0 && is_continuation(text[start - 1]) && text.size() - start < 3) --start;
    if (start > 0) --start;
    return text.substr(start);
}

}  // namespace

EndPunctuation::EndPunctuation(std::string_view chars) {
    for (std::size_t i = 0; i < chars.size();) {
        const std::size_t n = sequence_length(chars[i]);
        bool whole = n > 0 && i + n <= chars.size();
        for (std::size_t k = 1; whole && k < n; ++k) whole = is_continuation(chars[i + k]);
        if (!whole)
            throw std::invalid_argument("the punctuation marks are not valid UTF-8 (byte " +
                                        std::to_string(i) + ")");
        marks_.emplace_back(chars.substr(i, n));
        i += n;
    }
}

std::string EndPunctuation::missing_after(std::string_view text) const {
    if (marks_.empty()) return {};
    const std::string_view body = text.substr(0, text.size() - trailing_space(text));
    if (body.empty()) return {};
    const std::string_view last = last_character(body);
    for (const auto& m : marks_)
        if (last == m) return {};
    return marks_.front();
}

std::string EndPunctuation::completed(std::string_view text) const {
    const std::string mark = missing_after(text);
    if (mark.empty()) return std::string(text);
    return std::string(text.substr(0, text.size() - trailing_space(text))) + mark;
}

std::string EndPunctuation::Follower::pass(std::string_view piece) {
    std::string text = held_ + std::string(piece);
    held_.clear();
    // The end as it stands: trailing white space, or a character still
    // arriving (which may be a no-break space), does not count yet.
    const std::string_view whole =
        std::string_view(text).substr(0, text.size() - unfinished_character(text));
    const std::size_t body = whole.size() - trailing_space(whole);
    if (body > 0) {
        tail_.append(text, 0, body);
        // A character is at most 4 bytes; 8 keep one whole even if it came split.
        if (tail_.size() > 8) tail_.erase(0, tail_.size() - 8);
    }
    if (finish().empty()) return text;
    held_ = text.substr(body);
    text.resize(body);
    return text;
}

}  // namespace etude::server
