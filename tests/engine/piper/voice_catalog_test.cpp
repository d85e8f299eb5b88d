#include "engine/piper/voice_catalog.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "support/scoped_env.h"

using namespace etude::piper;
namespace fs = std::filesystem;

namespace {

using etude::test::ScopedEnv;

void touch(const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "{}";
}

}  // namespace

TEST(PiperVoiceCatalog, voices_are_found_by_name_in_the_folders_in_order) {
    const fs::path root = fs::path(ETUDE_TEST_TMP) / "piper_catalog";
    fs::remove_all(root);
    touch(root / "a/en_US-x-low.onnx.json");
    touch(root / "a/en_US-x-low.onnx");
    touch(root / "b/en_US-x-low.onnx.json");              // shadowed by a/
    touch(root / "b/de/de-y-high/de-y-high.onnx.json");   // too deep: not found
    touch(root / "b/fr-z-medium/fr-z-medium.onnx.json");  // in a folder of its own
    ScopedEnv path("ETUDE_VOICE_PATH", (root / "a").string() + ":" + (root / "b").string());
    ScopedEnv xdg("XDG_DATA_HOME", (root / "xdg").string());

    const auto folders = voice_folders();
    ASSERT_EQ(folders.size(), 3u);
    EXPECT_EQ(folders[2], (root / "xdg/libetude/voices").string());

    const auto x = find_voice("en_US-x-low");
    ASSERT_TRUE(x);
    EXPECT_EQ(x->model_path, (root / "a/en_US-x-low.onnx").string());
    EXPECT_TRUE(x->model_present);
    const auto z = find_voice("fr-z-medium");
    ASSERT_TRUE(z);
    EXPECT_FALSE(z->model_present);
    EXPECT_FALSE(find_voice("de-y-high"));
    EXPECT_FALSE(find_voice("slt"));
    try {
        require_voice("slt");
        ADD_FAILURE() << "found a voice that is not there";
    } catch (const VoiceNotFound& e) {
        EXPECT_NE(std::string(e.what()).find((root / "b").string()), std::string::npos) << e.what();
    }

    const auto all = list_voices();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].name, "en_US-x-low");
    EXPECT_EQ(all[1].name, "fr-z-medium");
}

TEST(PiperVoiceCatalog, a_path_finds_the_config_beside_the_model) {
    const fs::path root = fs::path(ETUDE_TEST_TMP) / "piper_catalog_path";
    fs::remove_all(root);
    touch(root / "v.onnx.json");
    const auto by_model = find_voice((root / "v.onnx").string());
    ASSERT_TRUE(by_model);
    EXPECT_EQ(by_model->config_path, (root / "v.onnx.json").string());
    const auto by_config = find_voice((root / "v.onnx.json").string());
    ASSERT_TRUE(by_config);
    EXPECT_EQ(by_config->model_path, (root / "v.onnx").string());
    EXPECT_THROW(find_voice((root / "missing.onnx").string()), etude::Error);
    EXPECT_THROW(find_voice((root / "v.txt/").string()), etude::Error);
    EXPECT_TRUE(looks_like_path("x.onnx"));
    EXPECT_FALSE(looks_like_path("en_US-joe-medium"));
}

// A folder of voices may hold a folder the server's user cannot read (a
// container's /voices mounted from a shared folder, another user's
// subfolder). It is skipped; the voices beside it are all listed. Read as an
// unprivileged user: the test runs as root in CI, and root reads anything.
TEST(PiperVoiceCatalog, an_unreadable_folder_hides_none_of_the_voices_beside_it) {
    char pattern[] = "/tmp/etude_catalog_XXXXXX";
    ASSERT_TRUE(mkdtemp(pattern));
    const fs::path root = pattern;
    const auto readable = [](const fs::path& p) {
        using fs::perms;
        fs::permissions(p, perms::owner_all | perms::group_read | perms::group_exec |
                               perms::others_read | perms::others_exec);
    };
    readable(root);
    const int voices = 8;  // beside the locked folder, so some come after it in any order
    for (int i = 0; i < voices; ++i) {
        const std::string name = "en_US-v" + std::to_string(i) + "-low";
        touch(i % 2 ? root / (name + ".onnx.json") : root / name / (name + ".onnx.json"));
        if (i % 2 == 0) readable(root / name);
    }
    touch(root / "locked/secret.onnx.json");
    fs::permissions(root / "locked", fs::perms::none);
    ScopedEnv path("ETUDE_VOICE_PATH", root.string());
    ScopedEnv xdg("XDG_DATA_HOME", (root / "xdg").string());

    // The listing runs in a child that is no longer root; it exits with how
    // many voices it found (255: it could not drop root).
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(255);
        _exit(static_cast<int>(list_voices().size()));
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    fs::permissions(root / "locked", fs::perms::owner_all);
    fs::remove_all(root);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 255)
        GTEST_SKIP() << "could not run as an unprivileged user (setuid)";
    EXPECT_EQ(WEXITSTATUS(status), voices) << "voices listed as an unprivileged user";
}
