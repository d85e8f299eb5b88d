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
        EXPECT_EQ(v.options.voice, v.name);
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
    v.options.voice = "rms";  // any StreamOptions the engine opens
    v.options.sample_rate = 22050;
    c.add(v);
    EXPECT_EQ(c.by_name("joe")->options.sample_rate, 22050);
    EXPECT_EQ(c.by_language("en_US")->name, "slt");  // the first listed still wins
    EXPECT_THROW(c.add(v), etude::Error);            // names are unique
    v.name.clear();
    EXPECT_THROW(c.add(v), etude::Error);
}

}  // namespace
