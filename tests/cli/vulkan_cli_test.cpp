// `--backend vulkan` from the command line: on lavapipe (the test
// environment sets VK_ICD_FILENAMES to it) `etude say` with the spectral
// vocoder and with a Piper voice, and `etude vocode`, give the CPU's audio
// within the parity tolerances, injected device faults included; without a
// driver, or with a device index that does not exist, one clear line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/wav_file.h"

namespace {

using etude::test::CliRun;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::tmpdir;
namespace fs = std::filesystem;

const std::string kData = std::string(ETUDE_TEST_DATA);
constexpr const char* kText = "Hello from the Vulkan backend. A second sentence follows it.";

bool have_vulkan() {
    static const bool found = run_etude("devices").out.find("  vulkan ") != std::string::npos;
    return found;
}

std::vector<float> samples(const fs::path& p) {
    return etude::test::read_wav<float>(p).samples;
}

// max |a - b| over the larger of the two peaks; 1 when the lengths differ.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty()) return 1.0;
    double peak = 0, diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        peak = std::max({peak, double(std::fabs(a[i])), double(std::fabs(b[i]))});
        diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    }
    return peak > 0 ? diff / peak : diff;
}

void expect_one_line_error(const CliRun& r, const std::string& needle) {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(CliVulkan, spectral_say_on_vulkan_equals_the_cpu_and_names_the_device) {
    if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device (see 'etude devices')";
    const fs::path cpu = tmpdir() / "vk_cpu.wav", vk = tmpdir() / "vk_vulkan.wav";
    const std::string say = "say " + quote(kText) + " --vocoder spectral --float ";
    ASSERT_EQ(run_etude(say + "--backend cpu -o " + cpu.string()).status, 0);
    const CliRun r = run_etude(say + "--backend vulkan --stats -o " + vk.string());
    ASSERT_EQ(r.status, 0) << r.err;
    // The named device makes the blocks from the first one (etude say waits
    // for it to warm up), and --stats says so.
    EXPECT_NE(r.err.find("spectral vocoder on llvmpipe"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(" 0 GPU blocks"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" 0 underruns"), std::string::npos) << r.err;
    // The engine test's bound for the spectral vocoder on a device
    // (tests/engine/spectral_vocoder_test.cpp): float FFTs and GEMMs.
    EXPECT_LT(relative_difference(samples(cpu), samples(vk)), 1e-3);
}

TEST(CliVulkan, a_piper_voice_decoded_on_vulkan_equals_the_cpu_also_when_the_device_fails) {
    if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device (see 'etude devices')";
    const std::string voice = quote(kData + "/piper/test_medium.onnx");
    const fs::path cpu = tmpdir() / "vk_piper_cpu.wav", vk = tmpdir() / "vk_piper.wav",
                   faulty = tmpdir() / "vk_piper_faulty.wav";
    // This test is about the device's own output, so every chunk must run
    // there: on lavapipe (the CPU as a Vulkan device) a chunk takes longer
    // than the CPU tier, and when neither fits its budget the scheduler
    // rightly takes the quicker CPU (on a loaded machine, most chunks; no
    // latency budget helps an offline reader, whose budget is its deadline
    // less its large read). ETUDE_FAULT=cpu-busy pins the device tier, so
    // the claim holds at any load. One sentence: every chunk on lavapipe
    // costs about its audio's length in CPU time here, and ten times that
    // with the two cores shared by eight busy loops (a test has 300 s).
    const std::string say = "say --voice " + voice + " " + quote("Hello from the Vulkan backend.") +
                            " --seed 3 --float ";
    ASSERT_EQ(run_etude(say + "--backend cpu -o " + cpu.string()).status, 0);
    const CliRun r =
        run_etude(say + "--backend vulkan --stats -o " + vk.string(), "", "ETUDE_FAULT=cpu-busy");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("decoder: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" on vulkan llvmpipe"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" 0 on the CPU"), std::string::npos) << r.err;
    // The flow runs there too (engine/voices/piper_stream_voice.h).
    EXPECT_NE(r.err.find("flow: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("flow: 0 pushes on the device"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" 0 on the CPU, 0 sentences taken over"), std::string::npos) << r.err;
    // The decoder's bound against PyTorch on every backend
    // (tests/engine/models/vits_parity_test.cpp).
    const auto want = samples(cpu);
    EXPECT_LT(relative_difference(want, samples(vk)), 1e-4);
    // Two device failures mid-sentence: the CPU remakes those chunks.
    const CliRun f = run_etude(say + "--backend vulkan --stats -o " + faulty.string(), "",
                               "ETUDE_FAULT=cpu-busy,kernel:2:0:200");
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_NE(f.err.find(" 0 underruns"), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("2 device failures"), std::string::npos) << f.err;
    EXPECT_LT(relative_difference(want, samples(faulty)), 1e-4);
}

TEST(CliVulkan, vocode_on_vulkan_equals_the_cpu) {
    if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device (see 'etude devices')";
    const std::string model = quote(kData + "/neural/hifigan_v1.lef");
    const std::string mel = quote(kData + "/neural/hifigan_v1_mel.npy");
    const fs::path cpu = tmpdir() / "vk_vocode_cpu.wav", vk = tmpdir() / "vk_vocode.wav";
    const std::string vocode = "vocode --model " + model + " --mel " + mel + " --float -q ";
    ASSERT_EQ(run_etude(vocode + "--backend cpu -o " + cpu.string()).status, 0);
    const CliRun r = run_etude(vocode + "--backend vulkan -o " + vk.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_LT(relative_difference(samples(cpu), samples(vk)), 1e-4);
}

// A device that fails mid-file (as one that times out does: both are a
// DeviceError) costs neither the file nor its exactness: the CPU copy of
// the model remakes that step from the same state and makes the rest.
TEST(CliVulkan, vocode_finishes_on_the_cpu_when_the_device_fails_midway) {
    if (!have_vulkan()) GTEST_SKIP() << "no Vulkan device (see 'etude devices')";
    const std::string model = quote(kData + "/neural/hifigan_v1.lef");
    const std::string mel = quote(kData + "/neural/hifigan_v1_mel.npy");
    const fs::path cpu = tmpdir() / "vk_cover_cpu.wav", vk = tmpdir() / "vk_cover.wav";
    const std::string vocode = "vocode --model " + model + " --mel " + mel + " --float --chunk 8 ";
    ASSERT_EQ(run_etude(vocode + "-q --backend cpu -o " + cpu.string()).status, 0);
    // After 800 device operations the model is made and vocoding has begun.
    const CliRun r =
        run_etude(vocode + "--backend vulkan -o " + vk.string(), "", "ETUDE_FAULT=kernel:1:0:800");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("etude vocode: injected kernel failure"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the CPU makes the rest of the audio"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("then the CPU after a device failure"), std::string::npos) << r.err;
    EXPECT_LT(relative_difference(samples(cpu), samples(vk)), 1e-4);
    // A failure while the model is uploaded: the model is made on the CPU.
    const fs::path early = tmpdir() / "vk_cover_early.wav";
    const CliRun e = run_etude(vocode + "--backend vulkan -o " + early.string(), "",
                               "ETUDE_FAULT=kernel:1:0:10");
    ASSERT_EQ(e.status, 0) << e.err;
    EXPECT_NE(e.err.find("; the model runs on the CPU"), std::string::npos) << e.err;
    EXPECT_EQ(samples(cpu), samples(early));
}

TEST(CliVulkan, no_driver_and_a_missing_device_give_one_clear_line) {
    const std::string no_driver = "VK_ICD_FILENAMES=/nonexistent/icd.json";
    const CliRun devices = run_etude("devices", "", no_driver);
    EXPECT_EQ(devices.status, 0) << devices.err;
    EXPECT_NE(devices.out.find("note: Vulkan: no Vulkan driver"), std::string::npos) << devices.out;
    const fs::path out = tmpdir() / "vk_none.wav";
    expect_one_line_error(
        run_etude("say Hello. --vocoder spectral --backend vulkan -o " + out.string(), "",
                  no_driver),
        "no Vulkan device");
    EXPECT_FALSE(fs::exists(out));
    if (!have_vulkan()) return;
    expect_one_line_error(run_etude("say Hello. --vocoder spectral --backend vulkan --gpu-device "
                                    "7 -o " +
                                    out.string()),
                          "there is no Vulkan device 7");
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
