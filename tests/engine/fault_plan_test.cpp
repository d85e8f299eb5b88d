// The one fault-injection vocabulary (engine/scheduling/fault_plan.h): what each item
// means, and a clear error for one that cannot be read.
#include "engine/scheduling/fault_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/engine.h"

using namespace etude::engine;

TEST(FaultPlan, one_text_names_processor_and_device_faults) {
    FaultSpec f;
    parse_faults(
        "slow:0.05:30,fallback-slow:0.1:40:4,kernel:2:0:1500,slow-analysis:25,slow-split:40,"
        "cpu-busy,host-analysis",
        f, "test");
    EXPECT_DOUBLE_EQ(f.slow_analysis_ms, 25);
    EXPECT_DOUBLE_EQ(f.slow_split_ms, 40);
    EXPECT_TRUE(f.cpu_busy);
    EXPECT_TRUE(f.host_analysis);
    EXPECT_DOUBLE_EQ(f.primary.slow_probability, 0.05);
    EXPECT_DOUBLE_EQ(f.primary.slow_ms, 30);
    EXPECT_EQ(f.primary.seed, 1u);
    EXPECT_DOUBLE_EQ(f.fallback.slow_probability, 0.1);
    EXPECT_EQ(f.fallback.seed, 4u);
    ASSERT_TRUE(f.device.has_value());
    EXPECT_EQ(f.device->kind, etude::gpu::GpuFault::KernelFailure);
    EXPECT_EQ(f.device->count, 2);
    EXPECT_EQ(f.device->after, 1500);
    FaultSpec none;
    parse_faults("", none, "test");
    EXPECT_FALSE(none.primary.active());
    EXPECT_FALSE(none.device.has_value());
    EXPECT_EQ(none.slow_analysis_ms, 0);
    EXPECT_EQ(none.slow_split_ms, 0);
    EXPECT_FALSE(none.cpu_busy);
    EXPECT_FALSE(none.host_analysis);
}

TEST(FaultPlan, malformed_text_is_an_error_naming_the_item) {
    for (const char* bad :
         {"slow:2:30", "slow:0.1", "sloww:0.1:3", "kernel:0", "late:x", "oom",
          "slow-analysis:", "slow-analysis:-5", "slow-analysis:5x", "slow-split:0",
          "slow-split:61000", "cpu-busy:1", "cpu-busyy", "host-analysis:1"}) {
        FaultSpec f;
        try {
            parse_faults(std::string("slow:0.1:5,") + bad, f, "ETUDE_FAULT");
            ADD_FAILURE() << bad << " was accepted";
        } catch (const etude::Error& e) {
            EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
                << e.what();
        }
    }
}

TEST(FaultPlan, create_stream_refuses_a_malformed_fault_option) {
    Engine engine;
    StreamOptions o;
    o.faults = "slow:lots";
    EXPECT_THROW(engine.create_stream(o), etude::Error);
}
