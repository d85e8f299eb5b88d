#include "engine/scheduling/kernel_registry.h"

#include <gtest/gtest.h>

#include "gpu/registry.h"

using namespace etude::gpu;
using etude::engine::KernelRegistry;

TEST(KernelRegistry, picks_the_fastest_capable_backend_per_operation_by_measurement) {
    auto& reg = DeviceRegistry::instance();
    std::vector<std::shared_ptr<Backend>> backends;
    for (const auto& d : reg.devices()) backends.push_back(reg.open({to_string(d.kind), d.index}));
    KernelRegistry kernels(backends);
    kernels.calibrate(3);
    ASSERT_GE(kernels.table().size(), 6u);
    for (const auto& c : kernels.table()) {
        ASSERT_EQ(c.measured.size(), backends.size()) << c.op;
        const double chosen = c.measured[c.chosen].ms;
        EXPECT_GE(chosen, 0.0) << c.op << " chose a backend that cannot run it";
        for (const auto& m : c.measured) {
            if (m.ms >= 0) {
                EXPECT_LE(chosen, m.ms) << c.op << ": a faster backend was measured";
            }
        }
        EXPECT_EQ(kernels.backend_for(c.op).get(), backends[c.chosen].get());
        std::printf("[registry] %-12s ->", c.op.c_str());
        for (const auto& m : c.measured) std::printf(" %s %.3f ms", m.backend.c_str(), m.ms);
        std::printf("\n");
    }
}
