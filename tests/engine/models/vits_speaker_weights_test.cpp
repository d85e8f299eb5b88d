// A Piper voice of several speakers holds its weights once: after the first
// speaker's decoder and flow, each other speaker's share their weights and
// hold only the biases its conditioning folds into (vits_decoder.h's
// share_vits_decoder, flow_network.h's sharing constructor). Before, each
// speaker made a whole copy (35 MB of resident memory a speaker for a
// medium voice on the CPU, docs/benchmarks.md).
//
// A shared network runs the same operations on the same weights as the
// same speaker's network made whole, so the two agree bit for bit, on the
// CPU backend, PoCL and lavapipe (CUDA on a GPU machine; each device skips
// where absent). The four-speaker test voice's speakers differ only in
// those biases, so a shared network that kept the first speaker's would be
// far from the whole one.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/models/neural_model.h"
#include "engine/models/vits/flow_network.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_voice.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kVoice = test::test_data_dir() + "/piper/test_medium_multi.onnx";
constexpr int kSampleRate = 22050;

std::vector<float> random_values(std::size_t n, unsigned seed) {
    std::vector<float> v(n);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : v) x = normal(rng);
    return v;
}

class VitsSpeakerWeights : public ::testing::TestWithParam<gpu::BackendKind> {
  protected:
    void SetUp() override {
        std::string why;
        backend_ = test::backend_of(GetParam(), why);
        if (!backend_) GTEST_SKIP() << why;
        backend_->reset_health();
        voice_ = VitsVoice::open(kVoice, kSampleRate, backend_);
        ASSERT_GE(voice_->num_speakers(), 3);
    }
    std::shared_ptr<gpu::Backend> backend_;
    std::shared_ptr<VitsVoice> voice_;
};

TEST_P(VitsSpeakerWeights, a_second_speakers_decoder_shares_the_weights_and_equals_its_whole_load) {
    const auto first = voice_->decoder(0);
    const auto shared = voice_->decoder(2);
    EXPECT_FALSE(first->shares_weights());
    EXPECT_TRUE(shared->shares_weights()) << "speaker 2's decoder was made whole";
    const auto whole = load_vits_decoder(voice_->weights(), kSampleRate, 2, "whole", backend_);
    const int frames = 40;
    const auto latent =
        random_values(std::size_t(first->audio().n_mels) * std::size_t(frames), 5);
    const auto got = shared->vocode(latent, frames);
    const auto want = whole->vocode(latent, frames);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);
    // The speakers' decoders differ: a shared decoder that kept speaker 0's
    // bias would pass the comparison above only by not being compared.
    EXPECT_GT(test::max_abs_diff(got, first->vocode(latent, frames)), 1e-3);
    EXPECT_GT(test::rms(got), 0.01);
}

TEST_P(VitsSpeakerWeights, a_second_speakers_flow_shares_the_weights_and_equals_its_whole_flow) {
    const auto first = voice_->flow_network(0);
    const auto shared = voice_->flow_network(2);
    const VitsFlowCoupling& a = first->couplings()[0];
    const VitsFlowCoupling& b = shared->couplings()[0];
    EXPECT_EQ(a.pre.w.handle(), b.pre.w.handle()) << "the weights were copied";
    EXPECT_EQ(a.in_layers[0].w.handle(), b.in_layers[0].w.handle());
    EXPECT_FALSE(b.pre.w.owns());
    EXPECT_NE(a.in_layers[0].b.handle(), b.in_layers[0].b.handle()) << "one speaker's biases";
    EXPECT_EQ(shared->speaker_biases(), VitsFlowNetwork::speaker_biases(voice_->weights(), 2));

    const VitsFlowNetwork whole(voice_->weights(), 2, backend_);
    const int frames = 70;
    const auto prior = random_values(std::size_t(first->channels()) * std::size_t(frames), 9);
    auto got = prior, want = prior, speaker0 = prior;
    shared->run(got, frames);
    whole.run(want, frames);
    first->run(speaker0, frames);
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);
    EXPECT_GT(test::max_abs_diff(got, speaker0), 1e-3) << "speaker 2's biases were not used";
}

// A shared network holds the one whose weights it borrows: dropped by the
// voice and everyone else, that one's weights stay for it.
TEST_P(VitsSpeakerWeights, a_shared_network_outlives_the_voice_it_shares_with) {
    const int frames = 30;
    auto decoder = voice_->decoder(1);  // (the first: whole)
    auto flow = voice_->flow_network(1);
    const auto shared_decoder = voice_->decoder(3);
    const auto shared_flow = voice_->flow_network(3);
    ASSERT_TRUE(shared_decoder->shares_weights());
    const auto latent =
        random_values(std::size_t(decoder->audio().n_mels) * std::size_t(frames), 6);
    const auto prior = random_values(std::size_t(shared_flow->channels()) * std::size_t(frames), 7);
    const auto audio_before = shared_decoder->vocode(latent, frames);
    auto z_before = prior;
    shared_flow->run(z_before, frames);
    decoder.reset();
    flow.reset();
    voice_.reset();
    const auto audio_after = shared_decoder->vocode(latent, frames);
    auto z_after = prior;
    shared_flow->run(z_after, frames);
    EXPECT_TRUE(test::identical(audio_before, audio_after));
    EXPECT_TRUE(test::identical(z_before, z_after));
}

TEST_P(VitsSpeakerWeights, biases_of_another_shape_are_refused) {
    const auto flow = voice_->flow_network(0);
    auto biases = flow->speaker_biases();
    biases[0].pop_back();
    EXPECT_THROW(VitsFlowNetwork(flow, biases), std::invalid_argument);
    biases = flow->speaker_biases();
    biases[1][0].push_back(0.0f);
    EXPECT_THROW(VitsFlowNetwork(flow, biases), std::invalid_argument);
    const std::vector<float> three(3, 0.0f);
    EXPECT_THROW(NeuralModel::sharing_weights(voice_->decoder(0), three), std::invalid_argument);
    EXPECT_THROW(voice_->decoder(voice_->num_speakers()), Error);
    EXPECT_THROW(voice_->flow_network(-1), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, VitsSpeakerWeights,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return gpu::to_string(info.param); });

}  // namespace
}  // namespace etude::engine
