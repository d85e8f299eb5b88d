// A written word and where its speech starts, as a voice's front end finds
// it: the input to a stream's word marks (Stream::report_words). Each voice
// says where in its own unit, since only it knows how its frames line up
// with the text: a built-in voice in its 5 ms frames, a Piper voice as the
// index of the word's first phoneme id (its frames follow from the
// durations, which a long sentence makes in stages).
#pragma once

#include <cstddef>
#include <string>

namespace etude::engine {

struct WordStart {
    std::string text;       // the word as written, without punctuation around it
    std::size_t start = 0;  // a built-in voice's frame, or a Piper phoneme id's index
};

}  // namespace etude::engine
