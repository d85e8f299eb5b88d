// A Piper voice's speakers share one copy of its decoder's and flow's
// weights on a device as on the CPU: PiperVoice::load_decoder() and
// load_flow() make a second speaker's networks borrow the first's weights
// and hold only the biases the speaker's conditioning folds into
// (engine/models/vits/vits_decoder.h, flow_network.h). Before, every
// speaker used made a whole copy (35 MB a speaker for a medium voice on the
// CPU; on a device as much device memory, docs/benchmarks.md).
//
// What each speaker then sounds like is checked elsewhere: bit for bit
// against a network made whole (models/vits_speaker_weights_test.cpp), and
// two speakers at once on a device against the CPU
// (piper_voices_side_by_side_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "engine/models/neural_model.h"
#include "engine/models/vits/flow_network.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/piper_on_device.h"
#include "support/test_data.h"

using namespace etude::engine;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium_multi.onnx";

class PiperSpeakerWeights : public etude::test::PiperOnDevice {};

TEST_P(PiperSpeakerWeights, a_second_speaker_borrows_the_first_ones_weights_on_the_device) {
    const auto voice = PiperVoice::open(kVoice);
    const auto first_decoder = voice->load_decoder(0, device_);
    const auto decoder = voice->load_decoder(2, device_);
    EXPECT_TRUE(decoder->shares_weights()) << "speaker 2's decoder was copied whole";
    EXPECT_EQ(&decoder->backend(), device_.get());
    EXPECT_EQ(voice->load_decoder(2, device_), decoder) << "made once a speaker and device";

    const auto first_flow = voice->load_flow(0, device_);
    const auto flow = voice->load_flow(2, device_);
    EXPECT_EQ(&flow->backend(), device_.get());
    EXPECT_EQ(flow->couplings()[0].pre.w.handle(), first_flow->couplings()[0].pre.w.handle())
        << "speaker 2's flow weights were copied";
    EXPECT_EQ(flow->couplings()[1].skip[0].w.handle(),
              first_flow->couplings()[1].skip[0].w.handle());
    // Its own speaker's biases, as the CPU's flow of the speaker has them.
    const auto cpu = etude::gpu::shared_cpu_backend();
    EXPECT_EQ(flow->speaker_biases(), voice->load_flow(2, cpu)->speaker_biases());
    EXPECT_NE(flow->speaker_biases(), first_flow->speaker_biases());

    // The same on the CPU backend (prepare() makes what a stream would).
    voice->prepare(0);
    voice->prepare(3);
    EXPECT_TRUE(voice->load_decoder(3, cpu)->shares_weights());
    EXPECT_EQ(voice->load_flow(3, cpu)->couplings()[0].pre.w.handle(),
              voice->load_flow(0, cpu)->couplings()[0].pre.w.handle());
}

INSTANTIATE_TEST_SUITE_P(Devices, PiperSpeakerWeights,
                         ::testing::Values(etude::gpu::BackendKind::Vulkan,
                                           etude::gpu::BackendKind::OpenCl,
                                           etude::gpu::BackendKind::Cuda),
                         [](const auto& info) { return etude::gpu::to_string(info.param); });

}  // namespace
