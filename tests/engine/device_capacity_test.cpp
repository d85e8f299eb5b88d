// Engine::measure_capacity() where a Piper voice's decoder runs on a device
// (Vulkan on lavapipe here; skipped where absent): the device's batch cost
// is measured through its real batched paths (the decoder's and the
// flow's, both in batches) and gives a finite figure, the admitted figure
// is the smaller of the device's and the host's, a device that fails in
// the measurement leaves the figure to the CPU, spoken, and the CPU alone
// is measured as before. No figure is held against the wall clock:
// lavapipe's speed depends on the machine's load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "engine/executor/batch_cost_fit.h"
#include "engine/models/vits/flow_network.h"
#include "engine/piper/espeak_session.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

// The small test voice: lavapipe makes its batches in milliseconds, where
// a medium voice's would take seconds.
const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

StreamOptions piper_on(const std::string& backend, const std::string& faults = "") {
    StreamOptions o;
    o.voice = PiperVoiceOptions{.piper_voice = kVoice, .seed = 3};
    o.sample_rate = 0;
    o.backend = backend;
    o.faults = faults;
    return o;
}

class DeviceCapacity : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!etude::piper::EspeakSession::available())
            GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
        std::string why;
        if (!etude::test::backend_of(etude::gpu::BackendKind::Vulkan, why)) GTEST_SKIP() << why;
    }
    Engine engine_;
};

}  // namespace

TEST_F(DeviceCapacity, the_devices_batches_are_timed_and_give_a_finite_figure) {
    const EngineCapacity c = engine_.measure_capacity(piper_on("vulkan"), 2);
    std::printf(
        "[ %s ] %.3f ms a launch + %.0f ns a frame (batches of 1-%d): the device carries "
        "%zu, the host %zu (%.1fx), %zu admitted\n",
        c.device.c_str(), static_cast<double>(c.launch_ns) * 1e-6, c.frame_ns,
        c.largest_batch_timed, c.device_streams, c.host_streams, c.host_speed, c.streams);
    EXPECT_EQ(c.device_error, "");
    EXPECT_NE(c.device.find("vulkan"), std::string::npos) << c.device;
    EXPECT_EQ(c.chunk_frames, 32);
    // Two batch sizes at least, unless one round took longer than the
    // whole budget (a loaded machine's lavapipe); at most 32 streams.
    EXPECT_GE(c.largest_batch_timed, 1);
    EXPECT_LE(c.largest_batch_timed, 32);
    EXPECT_GE(c.launch_ns, 0);
    EXPECT_TRUE(std::isfinite(c.frame_ns) && c.frame_ns > 0) << c.frame_ns;
    EXPECT_TRUE(std::isfinite(c.host_speed) && c.host_speed > 0) << c.host_speed;
    EXPECT_EQ(c.streams_measured, 2);
    EXPECT_EQ(c.host_streams, realtime_streams_at(c.host_speed));
    // The device's figure follows from the fitted cost: 0.8 of the time of
    // the largest batch in time, no larger than the largest timed.
    const auto voice = PiperVoice::open(kVoice);
    const double unit_s = 32.0 * voice->hop() / voice->sample_rate();
    const auto carried = etude::engine::executor::carried_streams(
        {c.launch_ns, c.frame_ns}, c.chunk_frames, unit_s, 0.8, c.largest_batch_timed);
    EXPECT_EQ(c.device_streams, static_cast<std::size_t>(carried.streams));
    EXPECT_EQ(c.batch_streams, carried.batch_units);
    EXPECT_EQ(c.streams, std::max<std::size_t>(1, std::min(c.device_streams, c.host_streams)));
    EXPECT_TRUE(std::isfinite(c.speed) && c.speed > 0);
}

TEST_F(DeviceCapacity, the_flow_is_timed_in_batches_as_the_decoder) {
    // Held, so the measurement opens this voice and its flow on this device
    // (both shared while held): what the flow ran shows in its statistics.
    const auto voice = PiperVoice::open(kVoice);
    std::string why;
    const auto device = etude::test::backend_of(etude::gpu::BackendKind::Vulkan, why);
    const auto flow = voice->load_flow(0, device);
    const std::uint64_t before = flow->batched_layer_calls();
    const EngineCapacity c = engine_.measure_capacity(piper_on("vulkan"), 2);
    ASSERT_EQ(c.device_error, "");
    if (c.largest_batch_timed < 2)
        GTEST_SKIP() << "one round took longer than the budget: no batch was timed";
    // Each batched push runs every WaveNet layer's dilated convolution of
    // the streams together, one backend call each; a flow timed one
    // stream at a time makes none. At least one push per batch size of 2
    // or more streams timed.
    std::uint64_t layers = 0;
    for (const auto& coupling : flow->couplings()) layers += coupling.in_layers.size();
    ASSERT_GT(layers, 0u);
    int sizes = 0;
    for (int units = 2; units <= c.largest_batch_timed; units *= 2) ++sizes;
    EXPECT_GE(flow->batched_layer_calls() - before, layers * static_cast<std::uint64_t>(sizes));
}

TEST_F(DeviceCapacity, a_device_that_fails_leaves_the_figure_to_the_cpu_spoken) {
    // Every operation on the device fails while it is measured.
    const EngineCapacity c = engine_.measure_capacity(piper_on("vulkan", "kernel:1000000"), 2);
    EXPECT_NE(c.device_error, "");
    EXPECT_EQ(c.device, "");
    EXPECT_EQ(c.launch_ns, 0);
    EXPECT_EQ(c.device_streams, 0u);
    EXPECT_GT(c.speed, 0);
    EXPECT_EQ(c.streams, realtime_streams_at(c.speed));
    // The device is whole again for the streams after it.
    const EngineCapacity again = engine_.measure_capacity(piper_on("vulkan"), 2);
    EXPECT_EQ(again.device_error, "");
    EXPECT_GT(again.frame_ns, 0);
}

TEST(CpuCapacity, the_cpu_alone_is_measured_by_speaking_as_before) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    const EngineCapacity c = engine.measure_capacity(piper_on("cpu"), 2);
    EXPECT_EQ(c.device, "");
    EXPECT_EQ(c.device_error, "");
    EXPECT_EQ(c.chunk_frames, 0);
    EXPECT_GT(c.speed, 0);
    EXPECT_EQ(c.streams, realtime_streams_at(c.speed));
}
