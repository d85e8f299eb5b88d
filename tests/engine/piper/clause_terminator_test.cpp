#include "engine/piper/clause_terminator.h"

#include <gtest/gtest.h>

using namespace etude::piper;

namespace {
void expect(const char* consumed, bool last, char mark, bool sentence, std::size_t bytes) {
    const ClauseTerminator t = recover_clause_terminator(consumed, last);
    EXPECT_EQ(t.mark, mark) << consumed;
    EXPECT_EQ(t.ends_sentence, sentence) << consumed;
    EXPECT_EQ(t.clause_bytes, bytes) << consumed;
}
}  // namespace

// The consumed pieces are what espeak-ng 1.51's espeak_TextToPhonemes
// advanced over: the clause and one character of the next one.
TEST(PiperClauseTerminator, clause_marks_are_recovered_and_the_read_ahead_left_out) {
    expect("Hello, w", false, ',', false, 6);
    expect("orld: t", false, ':', false, 5);
    expect("his is a test; r", false, ';', false, 14);
    expect("eally? Y", false, '?', true, 6);
    expect("es! D", false, '!', true, 3);
    expect("r. S", false, '.', true, 2);
    expect("es.", true, '.', true, 3);
}

TEST(PiperClauseTerminator, closing_quotes_and_brackets_keep_the_mark_before_them) {
    expect("He said \"hi.\"", false, '.', true, 13);
    expect("(Hello.)", false, '.', true, 8);
}

TEST(PiperClauseTerminator, an_opening_quote_read_ahead_belongs_to_the_next_clause) {
    expect("He said, \"", false, ',', false, 8);
    expect("She said: \"", false, ':', false, 9);
    expect("He said, '", false, ',', false, 8);
    expect("He said, (", false, ',', false, 8);
}

TEST(PiperClauseTerminator, dashes_end_a_clause_as_a_semicolon) {
    expect("A \xE2\x80\x93 B", false, ';', false, 5);  // en dash
    expect(" \xE2\x80\x94 d", false, ';', false, 4);   // em dash
}

TEST(PiperClauseTerminator, a_run_of_marks_counts_as_its_first) {
    expect("Wait?! R", false, '?', true, 6);
    expect("eally!! Y", false, '!', true, 7);
}

TEST(PiperClauseTerminator, an_ellipsis_is_a_pause_not_a_sentence_end) {
    expect("he U.S.A. is big... o", false, 0, false, 19);
    expect("He paused\xE2\x80\xA6 t", false, 0, false, 12);
}

TEST(PiperClauseTerminator, text_end_and_blank_lines_end_a_sentence_without_a_mark) {
    expect("k", true, 0, true, 1);
    expect("Line one\nline two\n\nP", false, 0, true, 17);
    expect("Line one\nline two w", false, 0, false, 17);  // espeak's clause buffer was full
    // A blank line is espeak's paragraph, which replaces the mark before it.
    expect("Is it?\n\nY", false, 0, true, 6);
    expect("Hi,\n\nt", false, 0, true, 3);
}

TEST(PiperClauseTerminator, full_width_marks_end_without_a_mark_as_piper_reports_them) {
    expect("\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE4\xB8\x96", false, 0, true, 9);  // 你好。世
    expect("\xE7\x95\x8C\xEF\xBC\x8C\xE4\xBD\xA0", false, 0, false, 6);             // 界，你
    expect("\xE0\xA4\xA8\xE0\xA5\x87\xE0\xA5\xA4 \xE0\xA4\x86", false, 0, true,
           9);  // Devanagari danda
}
