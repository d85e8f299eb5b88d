// OpenAI's speech stream events (server/speech_events.h): Base64 as RFC 4648
// writes it, and the two events as server-sent events.
#include "server/speech_events.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace {

using etude::server::base64;

TEST(SpeechEvents, base64_gives_rfc_4648s_test_vectors) {
    // RFC 4648, section 10.
    EXPECT_EQ(base64(""), "");
    EXPECT_EQ(base64("f"), "Zg==");
    EXPECT_EQ(base64("fo"), "Zm8=");
    EXPECT_EQ(base64("foo"), "Zm9v");
    EXPECT_EQ(base64("foob"), "Zm9vYg==");
    EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
    EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
}

TEST(SpeechEvents, base64_takes_every_byte_value) {
    // Bytes 0xFB 0xFF 0xBF use the alphabet's last two characters; 0x00 the first.
    EXPECT_EQ(base64(std::string("\xfb\xff\xbf", 3)), "+/+/");
    EXPECT_EQ(base64(std::string("\0\0\0", 3)), "AAAA");
    EXPECT_EQ(base64(std::string("\xff", 1)), "/w==");
}

TEST(SpeechEvents, each_event_is_one_data_line_and_a_blank_line_of_json) {
    const auto json_of = [](const std::string& event) {
        EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
        EXPECT_EQ(event.substr(event.size() - 2), "\n\n") << event;
        EXPECT_EQ(event.find('\n'), event.size() - 2) << event;
        return nlohmann::json::parse(event.substr(6, event.size() - 8));
    };
    const auto delta = json_of(etude::server::speech_audio_delta_event("foobar"));
    EXPECT_EQ(delta["type"], "speech.audio.delta");
    EXPECT_EQ(delta["audio"], "Zm9vYmFy");
    const auto done = json_of(etude::server::speech_audio_done_event());
    EXPECT_EQ(done["type"], "speech.audio.done");
    for (const char* key : {"input_tokens", "output_tokens", "total_tokens"})
        EXPECT_TRUE(done["usage"][key].is_number_integer()) << key;
}

}  // namespace
