#include "engine/piper/clause_terminator.h"

#include <string>
#include <string_view>

#include "engine/utf8.h"

namespace etude::piper {
namespace {

bool is_space(char32_t c) {
    return c == U' ' || c == U'\t' || c == U'\n' || c == U'\r' || c == U'\f' || c == U'\v' ||
           c == 0xA0 || c == 0x3000 || (c >= 0x2000 && c <= 0x200B);
}

bool one_of(std::u32string_view set, char32_t c) {
    return set.find(c) != set.npos;
}

// Quotes and brackets around a clause's punctuation ("hi." or (Hello.)).
bool is_quote_or_bracket(char32_t c) {
    return one_of(U"\"'()[]{}«»‘’‚“”„「」『』（）", c);
}

// Marks that only ever open: espeak's read-ahead character when the next
// clause starts with one.
bool is_opening(char32_t c) {
    return one_of(U"([{«‚„「『（¿¡", c);
}

// Quotes that open or close: opening when white space comes before them.
bool is_either_quote(char32_t c) {
    return one_of(U"\"'‘’“”", c);
}

struct Mark {
    char32_t c;
    char mark;
    bool sentence;
};
// espeak-ng's clause punctuation as its newer versions report it to Piper.
// The full-width forms carry "no space needed after" in espeak's flags, so
// the terminator Piper compares is not the plain one: no mark, and the
// sentence type stays.
constexpr Mark kMarks[] = {
    {U'.', '.', true},    {U'?', '?', true},    {U'!', '!', true},    {U',', ',', false},
    {U':', ':', false},   {U';', ';', false},   {0x037E, '?', true},   // Greek question mark
    {0x061F, '?', true},  {0x060C, ',', false}, {0x061B, ';', false},  // Arabic
    {0x0964, 0, true},                                                 // Devanagari danda
    {0x2013, ';', false}, {0x2014, ';', false},                        // en and em dash
    {0x2026, 0, false},                                                // ellipsis
    {0x3002, 0, true},    {0xFF0E, 0, true},    {0xFF1F, 0, true},    {0xFF01, 0, true},
    {0xFF0C, 0, false},   {0x3001, 0, false},   {0xFF1A, 0, false},   {0xFF1B, 0, false},
};

const Mark* mark_of(char32_t c) {
    for (const Mark& m : kMarks)
        if (m.c == c) return &m;
    return nullptr;
}

// Where the UTF-8 codepoint that ends text[0, end) begins.
std::size_t last_codepoint_start(std::string_view text, std::size_t end) {
    return utf8::char_start_at_or_before(text, end - 1);
}

// The codepoint text[begin, end) holds; 0 for bytes that are not one.
char32_t codepoint_at(std::string_view text, std::size_t begin, std::size_t end) {
    return begin < end ? utf8::decode_at(text.substr(begin, end - begin), 0).value : 0;
}

}  // namespace

ClauseTerminator recover_clause_terminator(std::string_view consumed, bool last) {
    ClauseTerminator t;
    std::size_t end = consumed.size();
    // The read-ahead character: the first of the next clause (a letter, a
    // digit, an opening mark or quote), unless espeak stopped on white
    // space or on this clause's own closing marks.
    if (!last && end > 0) {
        const std::size_t s = last_codepoint_start(consumed, end);
        const char32_t c = codepoint_at(consumed, s, end);
        const char32_t before =
            s > 0 ? codepoint_at(consumed, last_codepoint_start(consumed, s), s) : U' ';
        const bool opens = is_opening(c) || (is_either_quote(c) && is_space(before));
        if (opens || (!is_space(c) && !mark_of(c) && !is_quote_or_bracket(c))) end = s;
    }
    const std::size_t body_end = end;
    while (end > 0) {
        const std::size_t s = last_codepoint_start(consumed, end);
        if (!is_space(codepoint_at(consumed, s, end))) break;
        end = s;
    }
    t.clause_bytes = end;
    // A blank line is espeak's paragraph: it ends the sentence, and what
    // Piper is told is the paragraph, not the punctuation before it.
    const std::string_view tail = consumed.substr(end, body_end - end);
    if (tail.find('\n') != tail.rfind('\n')) {
        t.ends_sentence = true;
        return t;
    }
    while (end > 0) {
        const std::size_t s = last_codepoint_start(consumed, end);
        const char32_t c = codepoint_at(consumed, s, end);
        if (!is_quote_or_bracket(c) && !is_space(c)) break;
        end = s;
    }
    // A run of marks ("?!", "!!", "...") counts as its first, as espeak reads
    // it; a run of dots is espeak's ellipsis: a pause, not a sentence end.
    const Mark* m = nullptr;
    std::size_t dots = 0;
    while (end > 0) {
        const std::size_t s = last_codepoint_start(consumed, end);
        const Mark* here = mark_of(codepoint_at(consumed, s, end));
        if (!here) break;
        m = here;
        dots = here->c == U'.' ? dots + 1 : 0;
        end = s;
    }
    if (m && m->c == U'.' && dots > 1) m = mark_of(0x2026);
    if (m) {
        t.mark = m->mark;
        t.ends_sentence = m->sentence;
    }
    if (last) t.ends_sentence = true;
    return t;
}

}  // namespace etude::piper
