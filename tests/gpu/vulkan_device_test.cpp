// What the Vulkan backend says of its devices: a CPU device (lavapipe) has
// as many compute units as the CPUs this process may run on (its affinity),
// not the host's threads. Counted here with sched_getaffinity, apart from
// the backend's own count, and again with the thread held to one CPU.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {
namespace {

// The compute units of each Vulkan CPU device, listed now.
std::vector<int> cpu_device_units() {
    std::vector<std::string> notes;
    std::vector<int> units;
    for (const auto& d : list_vulkan_devices(notes))
        if (std::find(d.capabilities.begin(), d.capabilities.end(), "cpu") != d.capabilities.end())
            units.push_back(d.compute_units);
    return units;
}

TEST(VulkanDevice, a_cpu_device_counts_the_cpus_this_process_may_use) {
    cpu_set_t allowed;
    ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    const auto all = cpu_device_units();
    if (all.empty()) GTEST_SKIP() << "no Vulkan CPU device (lavapipe) here";
    for (const int u : all) EXPECT_EQ(u, CPU_COUNT(&allowed));

    // Held to one CPU (this thread's affinity, which the count reads), the
    // device has one unit whatever the host has.
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &one);
            break;
        }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    const auto held = cpu_device_units();
    ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
    ASSERT_EQ(held.size(), all.size());
    for (const int u : held) EXPECT_EQ(u, 1);
}

}  // namespace
}  // namespace etude::gpu
