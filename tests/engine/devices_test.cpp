// engine/devices.h: a backend request as front ends check and resolve it,
// and the CPU backend, which every machine has, as the devices list it.
#include "engine/devices.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "support/scoped_env.h"

namespace {

using etude::engine::DeviceRequest;
using etude::test::ScopedEnv;
namespace engine = etude::engine;

}  // namespace

TEST(ComputeDevices, a_request_is_checked_without_detection_and_says_whether_it_names_a_device) {
    EXPECT_FALSE(DeviceRequest{}.names_device());
    const auto cpu = engine::parse_device_request("cpu");
    EXPECT_EQ(cpu.backend, "cpu");
    EXPECT_EQ(cpu.device, -1);
    EXPECT_TRUE(cpu.names_device());
    EXPECT_TRUE(engine::parse_device_request("auto", 0).names_device());
    try {
        engine::parse_device_request("metal");
        FAIL() << "an unknown backend was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("metal"), std::string::npos) << e.what();
    }
}

TEST(ComputeDevices, the_environment_fills_only_what_a_request_leaves_open) {
    ScopedEnv backend("ETUDE_BACKEND", "cpu");
    ScopedEnv device("ETUDE_DEVICE", "0");
    const auto open = engine::with_device_environment({});
    EXPECT_EQ(open.backend, "cpu");
    EXPECT_EQ(open.device, 0);
    const auto named = engine::with_device_environment({"opencl", 1});
    EXPECT_EQ(named.backend, "opencl");
    EXPECT_EQ(named.device, 1);
}

TEST(ComputeDevices, the_cpu_backend_is_listed_last_and_has_no_gpu_tier) {
    const auto devices = engine::compute_devices();
    ASSERT_FALSE(devices.empty());
    EXPECT_EQ(devices.back().backend, "cpu");
    EXPECT_FALSE(devices.back().is_gpu);
    EXPECT_EQ(engine::resolve_device({"cpu", -1}).backend, "cpu");
    const auto plan = engine::plan_gpu_tier({"cpu", -1});
    EXPECT_FALSE(plan.use);
    EXPECT_EQ(plan.note, "the CPU backend was requested");
    EXPECT_THROW(engine::resolve_device({"cpu", 7}), std::invalid_argument);
}
