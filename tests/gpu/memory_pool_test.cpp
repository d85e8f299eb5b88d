#include "gpu/memory_pool.h"

#include <gtest/gtest.h>

#include "gpu/cpu/cpu_backend.h"
#include "gpu/registry.h"

using namespace etude::gpu;

TEST(MemoryPool, reuses_size_classes_and_tracks_usage_per_tag) {
    CpuBackend cpu;
    MemoryPool pool(cpu);
    {
        auto a = pool.allocate(1000, "weights");  // 4000 bytes -> 4096 class
        auto b = pool.allocate(10, "scratch");    // -> 256 class
        const auto u = pool.usage();
        EXPECT_EQ(u.in_use_bytes, 4096u + 256u);
        EXPECT_EQ(u.in_use_by_tag.at("weights"), 4096u);
        EXPECT_EQ(u.device_allocations, 2u);
    }
    auto u = pool.usage();
    EXPECT_EQ(u.in_use_bytes, 0u);
    EXPECT_EQ(u.cached_bytes, 4096u + 256u);
    EXPECT_EQ(u.peak_in_use_bytes, 4096u + 256u);
    {
        auto c = pool.allocate(900, "weights");  // same class: served from the free list
        EXPECT_EQ(pool.usage().device_allocations, 2u);
        EXPECT_EQ(pool.usage().reuses, 1u);
    }
    pool.trim();
    EXPECT_EQ(pool.usage().cached_bytes, 0u);
}

TEST(MemoryPool, out_of_memory_trims_and_retries_before_failing) {
    CpuBackend cpu;
    MemoryPool pool(cpu);
    { auto warm = pool.allocate(2048, "a"); }
    ASSERT_GT(pool.usage().cached_bytes, 0u);
    cpu.inject_fault({GpuFault::OutOfMemory, 1, 0});  // the device is "full" once
    auto b = pool.allocate(100000, "b");              // trims the cache, then succeeds
    EXPECT_TRUE(b);
    EXPECT_EQ(pool.usage().trims, 1u);
    EXPECT_EQ(pool.usage().cached_bytes, 0u);
    cpu.inject_fault({GpuFault::OutOfMemory, 2, 0});  // full even after the trim
    EXPECT_THROW(pool.allocate(100000, "c"), OutOfMemory);
}

TEST(DeviceRegistry, always_has_the_cpu_last_and_explains_what_is_missing) {
    auto& r = DeviceRegistry::instance();
    ASSERT_FALSE(r.devices().empty());
    EXPECT_EQ(r.devices().back().kind, BackendKind::Cpu);
    for (std::size_t i = 1; i < r.devices().size(); ++i) {
        // ranked: CUDA, Vulkan GPU, OpenCL GPU, Vulkan CPU (lavapipe), OpenCL
        // CPU (PoCL), plain CPU
        auto rank = [](const DeviceInfo& d) {
            switch (d.kind) {
                case BackendKind::Cuda:
                    return 0;
                case BackendKind::Vulkan:
                    return d.is_gpu ? 1 : 3;
                case BackendKind::OpenCl:
                    return d.is_gpu ? 2 : 4;
                case BackendKind::Cpu:
                    break;
            }
            return 5;
        };
        EXPECT_LE(rank(r.devices()[i - 1]), rank(r.devices()[i]));
    }
    bool cuda = false;
    for (const auto& d : r.devices()) cuda |= d.kind == BackendKind::Cuda;
    if (!cuda) {
        bool noted = false;
        for (const auto& n : r.notes()) noted |= n.rfind("CUDA:", 0) == 0;
        EXPECT_TRUE(noted) << "no CUDA device and no note saying why";
    }
    EXPECT_EQ(r.resolve({"cpu", -1}).kind, BackendKind::Cpu);
    EXPECT_THROW(r.resolve({"cpu", 99}), std::invalid_argument);
    EXPECT_THROW(parse_backend_request("metal"), std::invalid_argument);
    try {
        r.resolve({"cpu", 99});
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("device 99"), std::string::npos) << e.what();
    }
}

TEST(DeviceRegistry, environment_fills_open_fields_only) {
    setenv("ETUDE_BACKEND", "cpu", 1);
    setenv("ETUDE_DEVICE", "0", 1);
    EXPECT_EQ(with_environment({"auto", -1}).kind, "cpu");
    EXPECT_EQ(with_environment({"auto", -1}).device, 0);
    EXPECT_EQ(with_environment({"opencl", 2}).kind, "opencl");  // explicit wins
    EXPECT_EQ(with_environment({"opencl", 2}).device, 2);
    unsetenv("ETUDE_BACKEND");
    unsetenv("ETUDE_DEVICE");
}
