// The one "auto" device policy (engine/scheduling/device_choice.h): a named device is
// always used; "auto" uses a GPU only, never an OpenCL CPU device that shares
// the CPU tier's cores.
#include "engine/scheduling/device_choice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "gpu/registry.h"
#include "support/devices_here.h"

namespace {

using etude::engine::choose_gpu_tier;
using etude::engine::open_gpu_tier;
using etude::engine::open_model_backend;
namespace gpu = etude::gpu;

gpu::DeviceInfo device(gpu::BackendKind kind, bool is_gpu, const std::string& name) {
    gpu::DeviceInfo d;
    d.kind = kind;
    d.name = name;
    d.is_gpu = is_gpu;
    return d;
}

const gpu::DeviceInfo kCpu = device(gpu::BackendKind::Cpu, false, "cpu");
const gpu::DeviceInfo kPocl = device(gpu::BackendKind::OpenCl, false, "pthread-test-cpu");
const gpu::DeviceInfo kOpenClGpu = device(gpu::BackendKind::OpenCl, true, "test-gpu");
const gpu::DeviceInfo kCudaGpu = device(gpu::BackendKind::Cuda, true, "test-cuda-gpu");

TEST(DeviceChoice, auto_uses_a_gpu_of_either_backend) {
    for (const auto& d : {kOpenClGpu, kCudaGpu}) {
        const auto c = choose_gpu_tier({"auto", -1}, d);
        EXPECT_TRUE(c.use) << d.name;
        EXPECT_FALSE(c.named) << d.name;
        EXPECT_NE(c.note.find(d.name), std::string::npos) << c.note;
    }
}

TEST(DeviceChoice, auto_refuses_an_opencl_cpu_device_and_says_why) {
    const auto c = choose_gpu_tier({"auto", -1}, kPocl);
    EXPECT_FALSE(c.use);
    EXPECT_FALSE(c.named);
    EXPECT_EQ(c.note, "pthread-test-cpu is not a GPU");
}

TEST(DeviceChoice, a_named_backend_is_used_even_on_a_cpu_device) {
    const auto c = choose_gpu_tier({"opencl", -1}, kPocl);
    EXPECT_TRUE(c.use);
    EXPECT_TRUE(c.named);
    EXPECT_EQ(c.note, "opencl pthread-test-cpu");
}

TEST(DeviceChoice, a_device_index_names_the_device_even_with_auto) {
    const auto c = choose_gpu_tier({"auto", 1}, kPocl);
    EXPECT_TRUE(c.use);
    EXPECT_TRUE(c.named);
}

TEST(DeviceChoice, the_cpu_backend_means_no_gpu_tier) {
    const auto found_none = choose_gpu_tier({"auto", -1}, kCpu);
    EXPECT_FALSE(found_none.use);
    EXPECT_EQ(found_none.note, "no GPU found");
    const auto asked = choose_gpu_tier({"cpu", -1}, kCpu);
    EXPECT_FALSE(asked.use);
    EXPECT_TRUE(asked.named);
    EXPECT_EQ(asked.note, "the CPU backend was requested");
}

// ETUDE_BACKEND / ETUDE_DEVICE cleared (or set) for one test, restored after.
class Environment {
  public:
    Environment() {
        for (const char* name : {"ETUDE_BACKEND", "ETUDE_DEVICE"}) {
            const char* v = std::getenv(name);
            saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
            unsetenv(name);
        }
    }
    ~Environment() {
        for (const auto& [name, v] : saved_)
            if (v)
                setenv(name.c_str(), v->c_str(), 1);
            else
                unsetenv(name.c_str());
    }

  private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Against the devices this machine has: whatever the best device is, "auto"
// follows the policy above, and the neural path gets the CPU backend exactly
// when there is no GPU tier.
TEST(DeviceChoice, auto_on_this_machine_follows_the_policy) {
    Environment env;
    const auto best = gpu::DeviceRegistry::instance().devices().front();
    const auto tier = open_gpu_tier("auto", -1);
    EXPECT_EQ(tier.choice.use, best.kind != gpu::BackendKind::Cpu && best.is_gpu)
        << tier.choice.note;
    EXPECT_EQ(tier.backend != nullptr, tier.choice.use);
    std::string note;
    const auto backend = open_model_backend("auto", -1, &note);
    if (tier.choice.use) {
        EXPECT_EQ(backend, tier.backend);
    } else {
        EXPECT_EQ(backend, gpu::shared_cpu_backend());
        EXPECT_EQ(note, "CPU (" + tier.choice.note + ")");
    }
}

bool have_opencl() {
    return etude::test::has_device(gpu::BackendKind::OpenCl);
}

TEST(DeviceChoice, opencl_named_by_the_environment_is_opened) {
    if (!have_opencl()) GTEST_SKIP() << "no OpenCL device";
    Environment env;
    setenv("ETUDE_BACKEND", "opencl", 1);
    const auto tier = open_gpu_tier("auto", -1);
    EXPECT_TRUE(tier.choice.named);
    ASSERT_TRUE(tier.backend) << tier.choice.note;
    EXPECT_EQ(tier.backend->info().kind, gpu::BackendKind::OpenCl);
}

TEST(DeviceChoice, a_request_for_a_missing_device_is_an_error) {
    Environment env;
    EXPECT_THROW(open_gpu_tier("opencl", 99), std::invalid_argument);
    EXPECT_THROW(open_gpu_tier("metal", -1), std::invalid_argument);  // no such backend
    EXPECT_THROW(open_gpu_tier("vulkan", 99), std::invalid_argument);
}

}  // namespace
