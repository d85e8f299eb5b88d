#include "server/end_punctuation.h"

#include <stdexcept>

namespace etude::server {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

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

std::string_view without_trailing_space(std::string_view text) {
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
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
    const std::string_view body = without_trailing_space(text);
    if (body.empty()) return {};
    const std::string_view last = last_character(body);
    for (const auto& m : marks_)
        if (last == m) return {};
    return marks_.front();
}

void EndPunctuation::Follower::feed(std::string_view piece) {
    tail_ += piece;
    tail_.erase(without_trailing_space(tail_).size());
    // A character is at most 4 bytes; 8 keep one whole even if it came split.
    if (tail_.size() > 8) tail_.erase(0, tail_.size() - 8);
}

}  // namespace etude::server
