// A Piper stream's sentence is a state machine: begin() takes it, and each
// step() makes one chunk (its durations, flow and decoder) and writes its
// audio, the sentence's place kept in the voice between steps
// (voices/piper_stream_voice.h). So one thread can drive several streams'
// sentences, a chunk of each in turn, as the device executor of issue 41 is
// to: here, on the CPU, each stream's audio stepped in turn with another's
// equals its audio stepped alone, bit for bit (the CPU's math does not
// depend on what ran between two chunks), and a stream cancelled between
// its steps leaves the other's audio intact.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/voices/piper_voice.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/stepped_piper_stream.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

using etude::test::identical;
using etude::test::SteppedPiperStream;

// A stream of the test voice on the CPU, stepped by the test.
struct SteppedStream : SteppedPiperStream {
    SteppedStream(const std::shared_ptr<const PiperVoice>& piper, std::uint64_t seed,
                  char name = 's', std::string* log = nullptr)
        : SteppedPiperStream(piper, kVoice, seed, name, log) {}
};

std::vector<std::int64_t> sentence(std::size_t n) {
    return etude::test::piper_ids_of_length(n);
}

}  // namespace

TEST(PiperSentenceSteps, streams_stepped_in_turn_on_one_thread_equal_each_alone) {
    const auto piper = PiperVoice::open(kVoice);
    const auto ids_a = sentence(250), ids_b = sentence(120);

    SteppedStream alone_a(piper, 7), alone_b(piper, 8);
    alone_a.speak_alone(ids_a);
    alone_b.speak_alone(ids_b);
    ASSERT_TRUE(alone_a.complete);
    ASSERT_TRUE(alone_b.complete);
    // Several chunks each (4, 4, 8, 16, 32, ... frames), one per step.
    EXPECT_GT(alone_a.steps, 4);
    EXPECT_GT(alone_b.steps, 4);
    // A step writes its chunk's audio, if any (the decoder holds a first
    // chunk's end back for its right context).
    EXPECT_LE(alone_a.sink.writes, alone_a.steps);
    EXPECT_GE(alone_a.sink.writes, alone_a.steps / 2);

    std::string log;  // who wrote, in order
    SteppedStream a(piper, 7, 'a', &log), b(piper, 8, 'b', &log);
    a.begin(ids_a);
    b.begin(ids_b);
    while (a.more || b.more) {
        if (a.more) a.step();
        if (b.more) b.step();
    }
    EXPECT_TRUE(a.complete);
    EXPECT_TRUE(b.complete);
    EXPECT_EQ(a.steps, alone_a.steps);
    EXPECT_EQ(b.steps, alone_b.steps);
    EXPECT_TRUE(identical(a.sink.audio, alone_a.sink.audio))
        << a.sink.audio.size() << " samples against " << alone_a.sink.audio.size();
    EXPECT_TRUE(identical(b.sink.audio, alone_b.sink.audio))
        << b.sink.audio.size() << " samples against " << alone_b.sink.audio.size();
    // Their words were planned where they are heard, as alone.
    EXPECT_EQ(a.sink.words, alone_a.sink.words);
    EXPECT_EQ(b.sink.words, alone_b.sink.words);
    EXPECT_EQ(a.sink.words.size(), (ids_a.size() + 19) / 20);
    // Their audio went out interleaved: each wrote between the other's
    // first and last writes.
    EXPECT_LT(log.find('b'), log.rfind('a')) << log;
    EXPECT_LT(log.find('a'), log.rfind('b')) << log;

    // The next sentence of each goes on from where its stream is (the
    // noise drawn in order): again equal whether stepped alone or in turn.
    const std::size_t first_a = a.sink.audio.size(), first_b = b.sink.audio.size();
    alone_a.speak_alone(ids_b);
    alone_b.speak_alone(ids_a);
    a.begin(ids_b);
    b.begin(ids_a);
    while (a.more || b.more) {
        if (b.more) b.step();
        if (a.more) a.step();
    }
    EXPECT_TRUE(a.complete && b.complete);
    EXPECT_GT(a.sink.audio.size(), first_a);
    EXPECT_GT(b.sink.audio.size(), first_b);
    EXPECT_TRUE(identical(a.sink.audio, alone_a.sink.audio));
    EXPECT_TRUE(identical(b.sink.audio, alone_b.sink.audio));
}

TEST(PiperSentenceSteps, a_stream_cancelled_between_steps_leaves_the_other_intact) {
    const auto piper = PiperVoice::open(kVoice);
    const auto ids = sentence(250);
    SteppedStream alone(piper, 11);
    alone.speak_alone(ids);
    ASSERT_TRUE(alone.complete);

    SteppedStream kept(piper, 11), cancelled(piper, 12);
    kept.begin(ids);
    cancelled.begin(ids);
    // Steps in turn until the one to be cancelled has written audio.
    while (cancelled.sink.audio.empty() && cancelled.more) {
        kept.step();
        cancelled.step();
    }
    ASSERT_TRUE(cancelled.more);
    const std::size_t written = cancelled.sink.audio.size();
    ASSERT_GT(written, 0u);
    cancelled.ring.cancel();
    // Its next step finds the cancel: no more audio, and nothing more to do.
    cancelled.step();
    EXPECT_FALSE(cancelled.more);
    EXPECT_FALSE(cancelled.complete);
    EXPECT_EQ(cancelled.sink.audio.size(), written);
    while (kept.more) kept.step();
    EXPECT_TRUE(kept.complete);
    EXPECT_TRUE(identical(kept.sink.audio, alone.sink.audio));

    // The cancelled stream speaks its next sentence from the start, as a
    // fresh stream with its noise where the cancel left it would.
    cancelled.voice->reset();
    cancelled.speak_alone(sentence(60));
    EXPECT_TRUE(cancelled.complete);
    EXPECT_GT(cancelled.sink.audio.size(), written);
}
