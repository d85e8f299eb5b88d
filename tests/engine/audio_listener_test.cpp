// Stream::set_audio_listener(): a reader on an event loop (etude serve's
// Wyoming syntheses) reads with read_some(out, 0) only after the listener
// has called, and never waits in the stream. It must get every sample, the
// offline render's, and end; a listener removed is never called again.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

const std::string kText = "The porch light is on. The front door is locked, and the car is in.";

StreamOptions network(StreamOptions o) {
    o.scheduling = SchedulingClass::Network;
    o.backend = "cpu";
    return o;
}

StreamOptions builtin() {
    return network(StreamOptions{});
}

StreamOptions piper() {
    StreamOptions o;
    o.voice =
        PiperVoiceOptions{.piper_voice = etude::test::test_data_dir() + "/piper/test_medium.onnx"};
    o.sample_rate = 0;
    return network(o);
}

// What the listener has said, for a reader that waits on it alone.
struct Bell {
    std::mutex mu;
    std::condition_variable cv;
    bool rang = false;
    int calls = 0;
    void ring() {
        std::lock_guard lock(mu);
        rang = true;
        ++calls;
        cv.notify_one();
    }
    // False when it did not ring within `seconds`.
    bool wait(int seconds) {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return rang; })) return false;
        rang = false;
        return true;
    }
};

void reads_the_offline_render_on_the_listeners_word(const StreamOptions& options) {
    Engine engine;
    auto reference = engine.create_stream(options);
    reference->push_text(kText);
    reference->end_input();
    const std::vector<float> expected = etude::test::read_all(*reference);
    ASSERT_GT(expected.size(), 0u);

    auto stream = engine.create_stream(options);
    Bell bell;
    stream->set_audio_listener([&] { bell.ring(); });
    stream->push_text(kText);
    stream->end_input();
    std::vector<float> got, buffer(300);
    for (;;) {
        // Cleared (in wait()) before reading: a call in between rings again.
        ASSERT_TRUE(bell.wait(60)) << "the listener fell silent with " << got.size() << " of "
                                   << expected.size() << " samples read";
        while (const std::size_t n = stream->read_some(buffer, 0))
            got.insert(got.end(), buffer.begin(), buffer.begin() + std::ptrdiff_t(n));
        if (!stream->busy()) break;
    }
    EXPECT_EQ(got, expected);

    // Removed, it is not called again, while the stream speaks on.
    stream->set_audio_listener({});
    const int calls = bell.calls;
    stream->push_text(kText);
    stream->end_input();
    // (A Piper voice's noise goes on from the seed: other durations.)
    EXPECT_GT(etude::test::read_all(*stream).size(), expected.size() / 2);
    EXPECT_EQ(bell.calls, calls);
}

}  // namespace

TEST(AudioListener, a_builtin_voices_reader_woken_by_it_alone_gets_the_offline_render) {
    reads_the_offline_render_on_the_listeners_word(builtin());
}

TEST(AudioListener, a_piper_voices_reader_woken_by_it_alone_gets_the_offline_render) {
    reads_the_offline_render_on_the_listeners_word(piper());
}

TEST(AudioListener, a_stream_destroyed_never_calls_its_listener_again) {
    Engine engine;
    Bell bell;
    {
        auto stream = engine.create_stream(piper());
        stream->set_audio_listener([&] { bell.ring(); });
        stream->push_text(kText);  // destroyed in the middle of its speech
        ASSERT_TRUE(bell.wait(60));
    }
    const int calls = bell.calls;
    // Another stream's work goes on on the engine's threads meanwhile.
    auto other = engine.create_stream(piper());
    other->push_text(kText);
    other->end_input();
    EXPECT_GT(etude::test::read_all(*other).size(), 0u);
    EXPECT_EQ(bell.calls, calls);
}
