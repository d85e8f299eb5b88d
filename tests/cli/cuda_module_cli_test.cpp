// A CUDA module named by ETUDE_CUDA_MODULE that does not exist: one note in
// `etude devices` saying so, and the work falls back to another device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/cli_runner.h"

namespace {

using etude::test::run_etude;
using etude::test::tmpdir;

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

}  // namespace
