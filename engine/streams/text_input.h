// Splitting the text users hand us, before Flite sees it (engine/utf8.h
// checks that it is UTF-8).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text_check.h"

namespace etude::engine {

// Splits text into sentences at ., !, ? (and runs of them, with closing
// quotes or brackets) followed by white space, and at blank lines. A sentence
// longer than max_bytes is split further at the last comma/semicolon or white
// space before the limit (or, with none, at a UTF-8 character boundary), so
// that no single Flite utterance, and so no time to first audio, grows with
// the input. Pieces without speakable text are dropped.
std::vector<std::string> split_sentences(std::string_view text, std::size_t max_bytes = 400);

// Where the last sentence of `text` that no further text can change ends:
// split_sentences finds an end from the text up to it and the character
// after it, so an end followed by more text is an end of any longer text
// too, while one at the very end of `text` is not ("3." may go on as
// "3.5"). 0 when there is none. `from`: the caller knows that no sentence
// of `text` ends at a character before it (see no_sentence_end_before), so
// the scan starts there.
std::size_t last_final_sentence_end(std::string_view text, std::size_t from = 0);

// For text without a final sentence end: a position no further text can
// put an end before. Ends start at a terminator or a newline, and one that
// is not an end yet can only become one while nothing but terminators,
// closing quotes or brackets and white space follow it.
std::size_t no_sentence_end_before(std::string_view text);

// The length of the first piece split_sentences makes of a sentence longer
// than max_bytes (the whole length for a shorter one). It depends on the
// first max_bytes + 1 bytes only, so it is final while the sentence still
// grows.
std::size_t long_sentence_cut(std::string_view sentence, std::size_t max_bytes = 400);

}  // namespace etude::engine
