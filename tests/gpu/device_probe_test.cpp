// Device detection in a child process (gpu/device_probe.h): what the child
// finds comes back field for field, a child that fails says so, and the
// registry's detection leaves no driver loaded in the process that asked.
#include "gpu/device_probe.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpu/registry.h"
#include "support/emulation.h"

namespace etude::gpu {
namespace {

DeviceInfo odd_device() {
    DeviceInfo d;
    d.kind = BackendKind::Vulkan;
    d.index = 3;
    d.name = "12:colons: and\nnew lines";
    d.vendor = "";  // empty fields stay empty
    d.platform = std::string("a\0b", 3);
    d.driver = "Mesa 22.3.6 \xc3\xa9";
    d.global_memory = std::size_t{1} << 40;
    d.compute_units = 7;
    d.is_gpu = true;
    d.capabilities = {"fft", "", "discrete"};
    return d;
}

void expect_same(const DeviceInfo& a, const DeviceInfo& b) {
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.vendor, b.vendor);
    EXPECT_EQ(a.platform, b.platform);
    EXPECT_EQ(a.driver, b.driver);
    EXPECT_EQ(a.global_memory, b.global_memory);
    EXPECT_EQ(a.compute_units, b.compute_units);
    EXPECT_EQ(a.is_gpu, b.is_gpu);
    EXPECT_EQ(a.capabilities, b.capabilities);
}

TEST(DeviceProbe, what_the_child_finds_comes_back_field_for_field) {
    DeviceInfo cpu;
    cpu.name = "plain";
    const auto found = detect_in_child([&] {
        DetectedDevices d;
        d.devices = {odd_device(), cpu};
        d.notes = {"CUDA: no NVIDIA driver", "", "OpenCL: 3:x"};
        return d;
    });
    ASSERT_TRUE(found);
    ASSERT_EQ(found->devices.size(), 2u);
    expect_same(found->devices[0], odd_device());
    expect_same(found->devices[1], cpu);
    EXPECT_EQ(found->notes,
              (std::vector<std::string>{"CUDA: no NVIDIA driver", "", "OpenCL: 3:x"}));
}

TEST(DeviceProbe, a_child_that_finds_nothing_answers_nothing) {
    const auto found = detect_in_child([] { return DetectedDevices{}; });
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->devices.empty());
    EXPECT_TRUE(found->notes.empty());
}

TEST(DeviceProbe, a_driver_that_crashes_becomes_a_note) {
    const auto found = detect_in_child([]() -> DetectedDevices {
        ::kill(::getpid(), SIGKILL);
        return {};
    });
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->devices.empty());
    ASSERT_EQ(found->notes.size(), 1u);
    EXPECT_NE(found->notes[0].find("died of"), std::string::npos) << found->notes[0];
}

TEST(DeviceProbe, a_detection_that_throws_becomes_a_note) {
    const auto found = detect_in_child([]() -> DetectedDevices { throw std::runtime_error("no"); });
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->devices.empty());
    ASSERT_EQ(found->notes.size(), 1u);
    EXPECT_NE(found->notes[0].find("exit status 1"), std::string::npos) << found->notes[0];
}

TEST(DeviceProbe, a_driver_that_hangs_is_stopped) {
    const auto found = detect_in_child(
        []() -> DetectedDevices {
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        },
        200);
    ASSERT_TRUE(found);
    EXPECT_TRUE(found->devices.empty());
    ASSERT_EQ(found->notes.size(), 1u);
    EXPECT_NE(found->notes[0].find("a driver hangs"), std::string::npos) << found->notes[0];
}

// The libraries that device drivers bring (LLVM for PoCL and lavapipe; the
// CUDA runtime with cuBLAS in libetude_cuda.so), found in /proc/self/maps.
std::string driver_libraries_mapped() {
    std::ifstream maps("/proc/self/maps");
    std::string line, found;
    while (std::getline(maps, line))
        for (const char* lib : {"libpocl", "libvulkan_lvp", "libLLVM", "libetude_cuda", "libcublas",
                                "libcufft", "libcuda."})
            if (line.find(lib) != std::string::npos && found.find(lib) == std::string::npos)
                found += line + "\n";
    return found;
}

// In a fresh process (a death test re-runs this program for this test
// alone), so that nothing else here has opened a device first.
TEST(DeviceProbeDeathTest, detection_leaves_no_driver_loaded) {
    // The fresh process is this program executed again, which without
    // binfmt the kernel cannot do for an emulated one (and the emulated
    // suite is shown no device driver to load anyway).
    if (const char* emulator = etude::test::emulator())
        GTEST_SKIP() << "a death test re-executes this program, which under emulation (" << emulator
                     << ") needs binfmt; the native suite runs this test";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            auto& registry = DeviceRegistry::instance();
            registry.resolve({"cpu", -1});
            registry.devices();
            registry.resolve({"auto", -1});
            const std::string mapped = driver_libraries_mapped();
            std::fprintf(stderr, "%s", mapped.c_str());
            std::exit(mapped.empty() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace etude::gpu
