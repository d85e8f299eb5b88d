// What the engine tests read out of a stream: all its audio, offline
// (read() until it ends), and the marks it has reached so far.
#pragma once

#include <vector>

#include "engine/engine.h"

namespace etude::test {

inline std::vector<float> read_all(engine::Stream& stream) {
    std::vector<float> out, block(1000);
    for (std::size_t n; (n = stream.read(block)) > 0;)
        out.insert(out.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
}

inline std::vector<engine::SpeechMark> take_marks(engine::Stream& stream) {
    std::vector<engine::SpeechMark> out;
    for (engine::SpeechMark m; stream.next_mark(m);) out.push_back(m);
    return out;
}

}  // namespace etude::test
