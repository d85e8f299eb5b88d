// Where a program finds the CUDA module: one named by ETUDE_CUDA_MODULE that
// does not exist is one note in `etude devices`, and the work falls back to
// another device; unnamed, the module beside the program is tried first (as
// the Python package's extension finds one beside itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_runner.h"

namespace {

using etude::test::quote;
using etude::test::run_etude;
using etude::test::slurp;
using etude::test::tmpdir;
namespace fs = std::filesystem;

constexpr const char* kMissing = "/nonexistent/libetude_cuda.so";

TEST(CliCudaModule, a_named_module_that_does_not_exist_is_one_note) {
    const auto r = run_etude("devices", "", std::string("ETUDE_CUDA_MODULE=") + kMissing);
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string note =
        std::string("note: CUDA: ETUDE_CUDA_MODULE names ") + kMissing + ", which does not exist";
    const auto at = r.out.find(note);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(note, at + 1), std::string::npos) << "said twice: " << r.out;
    EXPECT_NE(r.out.find("  cpu    0: "), std::string::npos) << r.out;
}

TEST(CliCudaModule, auto_falls_back_when_the_named_module_does_not_exist) {
    const auto out = tmpdir() / "cuda_missing.wav";
    const auto r = run_etude("say 'Hello.' --backend auto -o " + out.string(), "",
                             std::string("ETUDE_CUDA_MODULE=") + kMissing);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(std::filesystem::file_size(out) > 44) << r.err;
}

TEST(CliCudaModule, unnamed_the_module_beside_the_program_is_tried) {
    // A copy of etude in a folder of its own, with a file that is no module
    // beside it: the note names that file, so it was the one tried.
    const fs::path folder = tmpdir() / "beside";
    fs::create_directories(folder);
    fs::copy_file(ETUDE_CLI_PATH, folder / "etude", fs::copy_options::overwrite_existing);
    std::ofstream(folder / "libetude_cuda.so") << "not a shared object\n";
    const fs::path out = tmpdir() / "beside.out";
    const std::string cmd = "env -u ETUDE_CUDA_MODULE " + quote((folder / "etude").string()) +
                            " devices > " + quote(out.string()) + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(out);
    const std::string text = slurp(out);
    // A build with CUDA finds its own module next (the build tree's), and
    // says nothing of the one that failed: then either a CUDA device is
    // listed, or that module's own note (no driver, no GPU) is the note.
    const bool later_module_loaded = text.find("note: CUDA: cannot load") == std::string::npos &&
                                     (text.find("  cuda ") != std::string::npos ||
                                      text.find("note: CUDA:") != std::string::npos);
    if (later_module_loaded)
        GTEST_SKIP() << "a CUDA module after the one beside the program loaded";
    const std::string note = "note: CUDA: cannot load " + (folder / "libetude_cuda.so").string();
    EXPECT_NE(text.find(note), std::string::npos) << text;
}

}  // namespace
