// `etude bench`: its table, with the capacity row `etude serve` would admit
// and the first audio it would promise,
// for a built-in voice (beside Flite) and a Piper voice (without Flite).
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "support/cli_runner.h"

namespace {

using etude::test::CliRun;
using etude::test::run_etude;

// The number in a row "| NAME | N ... |", or -1 without the row.
double row_number(const std::string& out, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("\\| " + name + " \\| ([0-9.]+)"))) return -1;
    return std::stod(m[1]);
}

}  // namespace

TEST(CliBench, a_built_in_voice_is_measured_beside_flite_with_its_capacity) {
    const CliRun r = run_etude("bench --runs 1");
    ASSERT_EQ(r.status, 0) << r.err;
    const double speed = row_number(r.out, "LibEtude speed \\(wall clock\\)");
    EXPECT_GT(speed, 1.0) << r.out;
    EXPECT_GT(row_number(r.out, "Flite library, same voice, in process"), 0.0) << r.out;
    // At least one stream; as `etude serve` says it: "N (K streams of its
    // reply at once speak Sx real time; ...)", N = floor(0.8 S).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        r.out, m,
        std::regex(
            "capacity: real-time streams `etude serve` admits at once \\| ([0-9]+) \\(([0-9]+) "
            "streams of its reply at once speak ([0-9.]+)x real time")))
        << r.out;
    const double streams = std::stod(m[1]), reply_speed = std::stod(m[3]);
    EXPECT_GE(std::stoi(m[2]), 2) << "streams measured at once";
    EXPECT_GE(streams, 1);
    EXPECT_NEAR(streams, std::max(1.0, reply_speed * 0.8), 1.0);  // the speed is printed rounded
    // The first audio promised at that many (at most 64, serve's default).
    ASSERT_TRUE(std::regex_search(r.out, m,
                                  std::regex("first audio promised: ([0-9]+) replies started "
                                             "together, the last / the median \\| ([0-9]+) ms / "
                                             "([0-9]+) ms")))
        << r.out;
    EXPECT_EQ(std::stod(m[1]), std::min(streams, 64.0)) << r.out;
    EXPECT_GE(std::stod(m[2]), std::stod(m[3])) << "the last is never before the median";
    EXPECT_GT(std::stod(m[3]), 0.0) << r.out;
}

TEST(CliBench, a_piper_voice_is_measured_without_flite_rows) {
    const CliRun r = run_etude("bench --runs 1 --voice " + std::string(ETUDE_TEST_DATA) +
                               "/piper/test_medium.onnx");
    if (r.status != 0 && r.err.find("espeak") != std::string::npos) GTEST_SKIP() << r.err;
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(row_number(r.out, "LibEtude speed \\(wall clock\\)"), 0.0) << r.out;
    EXPECT_EQ(r.out.find("Flite"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("admits at once | "), std::string::npos) << r.out;
    EXPECT_EQ(run_etude("bench --runs 0").status, 2);
    EXPECT_EQ(run_etude("bench --runs 1 --voice nobody").status, 1);
}
