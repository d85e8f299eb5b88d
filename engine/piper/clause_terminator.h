// What ended an espeak-ng clause, recovered from the text. Piper asks
// espeak_TextToPhonemesWithTerminator; Debian's espeak-ng 1.51 lacks it,
// so we read the punctuation from the text espeak consumed for the clause.
// The rules reproduce what the newer espeak-ng reports to Piper (checked by
// the test piper.phonemes against piper-tts): "." "?" "!" end a sentence
// and are put back (a run such as "?!" counts as its first mark); "," ":"
// ";" end a clause, and so does a dash (as ";"); an ellipsis ends a clause
// with no mark; full-width CJK marks and the Devanagari danda end a clause
// or a sentence with no mark; a blank line ends a sentence with no mark
// (espeak's paragraph replaces the punctuation before it); a clause without
// punctuation ends a sentence only at the end of the text.
#pragma once

#include <cstddef>
#include <string_view>

namespace etude::piper {

struct ClauseTerminator {
    char mark = 0;               // '.', '?', '!', ',', ':', ';' or 0 for none
    bool ends_sentence = false;  // the clause closes a sentence (one model call)
    // Bytes of the consumed text that belong to this clause: espeak reads one
    // character of the next clause ahead, which is left out here.
    std::size_t clause_bytes = 0;
};

// consumed: the text espeak_TextToPhonemes advanced over for one clause (from
// the text pointer before the call to the one after it); last: the call
// returned the end of the text.
ClauseTerminator recover_clause_terminator(std::string_view consumed, bool last);

}  // namespace etude::piper
