// Engine::list_voices(), find_voice() and voice_folders(): the one list of
// voices and their facts that the servers, the module and Python ask. The
// expected facts are the test data's configs as written (tests/data/piper),
// and the built-in voices' rate is what a stream at the voice's own rate
// reports.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/etude.h"
#include "support/scoped_env.h"
#include "support/test_data.h"

using etude::engine::BuiltinVoiceOptions;
using etude::engine::Engine;
using etude::engine::StreamOptions;
using etude::engine::VoiceInfo;
namespace fs = std::filesystem;

namespace {

using etude::test::ScopedEnv;

const std::string kData = etude::test::test_data_dir() + "/piper/";

void copy(const std::string& from, const fs::path& to) {
    fs::create_directories(to.parent_path());
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

}  // namespace

TEST(VoiceList, the_builtin_voices_come_first_with_their_facts) {
    ScopedEnv path("ETUDE_VOICE_PATH", "");
    ScopedEnv xdg("XDG_DATA_HOME", (fs::path(ETUDE_TEST_TMP) / "no-voices").string());
    const auto voices = Engine::list_voices();
    ASSERT_EQ(voices.size(), 3u);
    const char* names[] = {"slt", "rms", "awb"};
    Engine engine(Engine::Options{{}});
    for (std::size_t i = 0; i < 3; ++i) {
        const VoiceInfo& v = voices[i];
        EXPECT_EQ(v.name, names[i]);
        EXPECT_EQ(v.kind, VoiceInfo::Kind::Builtin);
        EXPECT_EQ(v.quality, "builtin");
        EXPECT_TRUE(v.model_path.empty());
        EXPECT_TRUE(v.problem.empty());
        EXPECT_EQ(v.speakers, std::vector<std::string>{"0"});
        StreamOptions own_rate;
        own_rate.voice = BuiltinVoiceOptions{.voice = v.name};
        own_rate.sample_rate = 0;
        EXPECT_EQ(v.sample_rate, engine.create_stream(own_rate)->sample_rate()) << v.name;
    }
    EXPECT_EQ(voices[0].language, "en_US");
    EXPECT_EQ(voices[0].description, "US English female");
    EXPECT_EQ(voices[2].language, "en_GB");
    EXPECT_EQ(voices[2].dataset, "CMU ARCTIC awb");
    const auto slt = Engine::find_voice("slt");
    ASSERT_TRUE(slt);
    EXPECT_EQ(slt->kind, VoiceInfo::Kind::Builtin);
    EXPECT_EQ(slt->description, "US English female");
}

TEST(VoiceList, piper_voices_in_the_folders_are_listed_and_found_by_name) {
    const fs::path root = fs::path(ETUDE_TEST_TMP) / "voice_list";
    fs::remove_all(root);
    copy(kData + "test_medium_multi.onnx.json", root / "a/multi/multi.onnx.json");
    copy(kData + "test_medium_multi.onnx", root / "a/multi/multi.onnx");
    copy(kData + "bad-sample-rate.onnx.json", root / "b/bad.onnx.json");
    ScopedEnv path("ETUDE_VOICE_PATH", (root / "a").string() + ":" + (root / "b").string());
    ScopedEnv xdg("XDG_DATA_HOME", (root / "xdg").string());

    const auto folders = Engine::voice_folders();
    ASSERT_EQ(folders.size(), 3u);
    EXPECT_EQ(folders[1], (root / "b").string());
    EXPECT_EQ(folders[2], (root / "xdg/libetude/voices").string());

    const auto voices = Engine::list_voices();
    ASSERT_EQ(voices.size(), 5u);  // slt, rms, awb, multi, bad
    const VoiceInfo& multi = voices[3];
    EXPECT_EQ(multi.kind, VoiceInfo::Kind::Piper);
    EXPECT_EQ(multi.name, "multi");
    EXPECT_EQ(multi.model_path, (root / "a/multi/multi.onnx").string());
    EXPECT_EQ(multi.language, "en_US");
    EXPECT_EQ(multi.quality, "medium");
    EXPECT_EQ(multi.sample_rate, 22050);
    EXPECT_EQ(multi.speakers,
              (std::vector<std::string>{"speaker_0", "speaker_1", "speaker_2", "speaker_3"}));
    EXPECT_EQ(multi.description, "English (United States)");
    EXPECT_EQ(multi.dataset, "test_medium_multi");
    EXPECT_EQ(multi.version, "1.0.0");
    EXPECT_EQ(multi.length_scale, 1.0f);
    EXPECT_TRUE(multi.problem.empty()) << multi.problem;
    const VoiceInfo& bad = voices[4];
    EXPECT_EQ(bad.name, "bad");
    EXPECT_NE(bad.problem.find("sample_rate"), std::string::npos) << bad.problem;

    const auto found = Engine::find_voice("multi");
    ASSERT_TRUE(found);
    EXPECT_EQ(found->model_path, multi.model_path);
    const auto by_path = Engine::find_voice(multi.model_path + ".json");
    ASSERT_TRUE(by_path);
    EXPECT_EQ(by_path->name, "multi");
    EXPECT_FALSE(Engine::find_voice("nobody"));
    EXPECT_FALSE(Engine::find_voice(""));
    EXPECT_THROW(Engine::find_voice("bad"), etude::Error);
    EXPECT_THROW(Engine::find_voice((root / "missing.onnx").string()), etude::Error);

    // describe_voice() reads the network too, and tells the same facts.
    const auto described = Engine::describe_voice("multi");
    EXPECT_EQ(described.name, multi.name);
    EXPECT_EQ(described.language, multi.language);
    EXPECT_EQ(described.sample_rate, multi.sample_rate);
    EXPECT_EQ(described.speakers, multi.speakers);
    EXPECT_EQ(described.description, multi.description);
}

TEST(VoiceList, the_c_api_lists_the_same_voices) {
    const fs::path root = fs::path(ETUDE_TEST_TMP) / "voice_list_c";
    fs::remove_all(root);
    copy(kData + "test_x_low.onnx.json", root / "x.onnx.json");
    copy(kData + "test_x_low.onnx", root / "x.onnx");
    copy(kData + "bad-sample-rate.onnx.json", root / "bad.onnx.json");
    ScopedEnv path("ETUDE_VOICE_PATH", root.string());
    ScopedEnv xdg("XDG_DATA_HOME", (root / "xdg").string());

    etude_voice_list* list = nullptr;
    ASSERT_EQ(etude_voice_list_open(&list), ETUDE_OK);
    ASSERT_EQ(etude_voice_list_count(list), 4u);  // slt, rms, awb, x (bad is left out)
    const etude_voice_info* slt = etude_voice_list_voice(list, 0);
    EXPECT_STREQ(etude_voice_info_name(slt), "slt");
    EXPECT_TRUE(etude_voice_info_is_builtin(slt));
    EXPECT_STREQ(etude_voice_info_model_path(slt), "");
    const etude_voice_info* x = etude_voice_list_voice(list, 3);
    EXPECT_STREQ(etude_voice_info_name(x), "x");
    EXPECT_FALSE(etude_voice_info_is_builtin(x));
    EXPECT_EQ(etude_voice_info_model_path(x), (root / "x.onnx").string());
    EXPECT_STREQ(etude_voice_info_quality(x), "x_low");
    EXPECT_EQ(etude_voice_info_sample_rate(x), 16000);
    EXPECT_EQ(etude_voice_list_voice(list, 4), nullptr);
    etude_voice_list_destroy(list);
    EXPECT_EQ(etude_voice_list_open(nullptr), ETUDE_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(etude_voice_list_count(nullptr), 0u);
}
