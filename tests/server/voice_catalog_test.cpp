// The server's voice list: the built-in voices in order, lookup by name and
// by language, and a voice added through the public API beside them.
#include "server/voice_catalog.h"

#include <gtest/gtest.h>

namespace {

using etude::server::VoiceCatalog;
using etude::server::VoiceEntry;

TEST(VoiceCatalog, builtin_voices_come_first_slt_the_default) {
    const auto c = VoiceCatalog::builtin();
    ASSERT_EQ(c.voices().size(), 3u);
    EXPECT_EQ(c.default_voice().name, "slt");
    EXPECT_EQ(c.voices()[1].name, "rms");
    EXPECT_EQ(c.voices()[2].name, "awb");
    for (const auto& v : c.voices()) {
        EXPECT_EQ(etude::engine::voice_name(v.options), v.name);
        EXPECT_EQ(v.options.sample_rate, 16000.0);
        EXPECT_FALSE(v.languages.empty());
        EXPECT_FALSE(v.attribution_name.empty());
    }
}

TEST(VoiceCatalog, lookup_by_name_and_language) {
    const auto c = VoiceCatalog::builtin();
    EXPECT_EQ(c.by_name("awb")->name, "awb");
    EXPECT_EQ(c.by_name("Awb"), nullptr);  // names are exact
    EXPECT_EQ(c.by_language("en_US")->name, "slt");
    EXPECT_EQ(c.by_language("en-us")->name, "slt");
    EXPECT_EQ(c.by_language("EN_GB")->name, "awb");
    EXPECT_EQ(c.by_language("en")->name, "slt");  // a language alone matches its regions
    EXPECT_EQ(c.by_language("de_DE"), nullptr);
    EXPECT_EQ(c.by_language("e"), nullptr);
    EXPECT_EQ(c.by_language(""), nullptr);
}

TEST(VoiceCatalog, a_voice_is_added_through_its_stream_options) {
    auto c = VoiceCatalog::builtin();
    VoiceEntry v;
    v.name = "joe";
    v.languages = {"en_US"};
    v.speakers = {"a", "b"};
    v.options.voice = etude::engine::BuiltinVoiceOptions{.voice = "rms"};  // any the engine opens
    v.options.sample_rate = 22050;
    c.add(v);
    EXPECT_EQ(c.by_name("joe")->options.sample_rate, 22050);
    EXPECT_EQ(c.by_language("en_US")->name, "slt");  // the first listed still wins
    EXPECT_THROW(c.add(v), etude::Error);            // names are unique
    v.name.clear();
    EXPECT_THROW(c.add(v), etude::Error);
}

// What clients see of a voice (Wyoming `info`, /v1/audio/voices), worded
// from the engine's facts: the built-in voices' and the test voices' configs
// as written (tests/data/piper).
TEST(VoiceCatalog, voices_are_described_to_clients_from_the_engines_facts) {
    const auto c = VoiceCatalog::builtin();
    EXPECT_EQ(c.by_name("slt")->description,
              "US English female (CMU ARCTIC slt), Flite front end, LibEtude vocoder");
    EXPECT_EQ(c.by_name("awb")->languages, std::vector<std::string>{"en_GB"});
    EXPECT_EQ(c.by_name("rms")->version, "flite-2.2");
    EXPECT_TRUE(c.by_name("rms")->speakers.empty());

    const std::string data = std::string(ETUDE_TEST_DATA) + "/piper/";
    const VoiceEntry multi = VoiceCatalog::piper_voice(data + "test_medium_multi.onnx");
    EXPECT_EQ(multi.name, "test_medium_multi");
    EXPECT_EQ(multi.description, "Piper voice test_medium_multi (medium, VITS, 22050 Hz)");
    EXPECT_EQ(multi.languages, std::vector<std::string>{"en_US"});
    EXPECT_EQ(multi.speakers,
              (std::vector<std::string>{"speaker_0", "speaker_1", "speaker_2", "speaker_3"}));
    EXPECT_EQ(etude::engine::voice_name(multi.options), data + "test_medium_multi.onnx");
    EXPECT_EQ(etude::engine::voice_kind(multi.options), etude::engine::VoiceKind::Piper);
    EXPECT_EQ(multi.options.sample_rate, 22050.0);
    EXPECT_EQ(multi.attribution_name, "rhasspy");
    const VoiceEntry single = VoiceCatalog::piper_voice(data + "test_x_low.onnx.json");
    EXPECT_TRUE(single.speakers.empty());  // one speaker: none listed
    EXPECT_EQ(single.options.sample_rate, 16000.0);

    try {
        VoiceCatalog::piper_voice("no-such-voice");
        ADD_FAILURE() << "a voice that is not there was found";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("no Piper voice 'no-such-voice'"), std::string::npos)
            << e.what();
    }
}

}  // namespace
