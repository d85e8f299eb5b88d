// The stream options of the engine tests that speak text with a Piper voice:
// the small multi-speaker test voice (tests/data/piper), its first speaker,
// on the CPU at the voice's own rate, with a seed, so that streams made
// alike give the same audio.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "support/test_data.h"

namespace etude::test {

inline engine::StreamOptions piper_test_stream(std::uint64_t seed) {
    engine::StreamOptions o;
    o.voice = engine::PiperVoiceOptions{
        .piper_voice = etude::test::test_data_dir() + "/piper/test_medium_multi.onnx",
        .speaker = "speaker_0",
        .seed = seed};
    o.sample_rate = 0;
    o.backend = "cpu";
    return o;
}

}  // namespace etude::test
