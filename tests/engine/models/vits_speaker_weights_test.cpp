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
#include "support/random_prior.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kVoice = test::test_data_dir() + "/piper/test_medium_multi.onnx";
constexpr int kSampleRate = 22050;

class VitsSpeakerWeights : public test::OnBackend {
  protected:
    void SetUp() override {
        OnBackend::SetUp();
        if (IsSkipped()) return;
        voice_ = VitsVoice::open(kVoice, kSampleRate, backend_);
        ASSERT_GE(voice_->num_speakers(), 3);
    }
    std::shared_ptr<VitsVoice> voice_;
};

TEST_P(VitsSpeakerWeights, a_second_speakers_decoder_shares_the_weights_and_equals_its_whole_load) {
    const auto first = voice_->decoder(0);
    const auto shared = voice_->decoder(2);
    EXPECT_FALSE(first->shares_weights());
    EXPECT_TRUE(shared->shares_weights()) << "speaker 2's decoder was made whole";
    const auto whole = load_vits_decoder(voice_->weights(), kSampleRate, 2, "whole", backend_);
    const int frames = 40;
    const auto latent = test::random_prior(first->audio().n_mels, frames, 5);
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

    // (From the file: the voice keeps of the flow's weights only what folds
    // a speaker into its biases.)
    const VitsFlowNetwork whole(read_vits_weights(kVoice), 2, backend_);
    const int frames = 70;
    const auto prior = test::random_prior(first->channels(), frames, 9);
    auto got = prior, want = prior, speaker0 = prior;
    shared->run(got, frames);
    whole.run(want, frames);
    first->run(speaker0, frames);
    EXPECT_TRUE(test::identical(got, want)) << "max |difference| " << test::max_abs_diff(got, want);
    EXPECT_GT(test::max_abs_diff(got, speaker0), 1e-3) << "speaker 2's biases were not used";
}

// A shared network holds the network that owns the weights it borrows (the
// first speaker's), not the one it was made from, which may go: dropped by
// the voice and everyone else, the owner stays for it, and no chain of
// networks a speaker each is kept alive. Its audio is the same after.
TEST_P(VitsSpeakerWeights, a_shared_network_holds_the_owner_of_its_weights_alone) {
    const int frames = 30;
    std::weak_ptr<const NeuralModel> owner = voice_->decoder(2);   // the first: whole
    std::weak_ptr<const NeuralModel> middle = voice_->decoder(1);  // shares 2's
    const auto last = voice_->decoder(3);  // made from 1's (the first in the voice's map)
    ASSERT_TRUE(last->shares_weights());
    const auto root_flow = voice_->flow_network(0);  // made at open
    auto middle_flow = std::make_shared<const VitsFlowNetwork>(
        root_flow, VitsFlowNetwork::speaker_biases(read_vits_weights(kVoice), 1));
    const auto last_flow = std::make_shared<const VitsFlowNetwork>(
        middle_flow, VitsFlowNetwork::speaker_biases(read_vits_weights(kVoice), 3));
    const std::weak_ptr<const VitsFlowNetwork> flow_owner = root_flow, flow_middle = middle_flow;

    const auto latent = test::random_prior(last->audio().n_mels, frames, 6);
    const auto prior = test::random_prior(last_flow->channels(), frames, 7);
    const auto audio_before = last->vocode(latent, frames);
    auto z_before = prior;
    last_flow->run(z_before, frames);
    middle_flow.reset();
    voice_.reset();
    EXPECT_FALSE(owner.expired()) << "the decoder's weights went with the voice";
    EXPECT_TRUE(middle.expired()) << "speaker 1's decoder is kept alive by speaker 3's";
    EXPECT_TRUE(flow_middle.expired()) << "a chain of flows";
    EXPECT_EQ(flow_owner.lock(), root_flow);
    const auto audio_after = last->vocode(latent, frames);
    auto z_after = prior;
    last_flow->run(z_after, frames);
    EXPECT_TRUE(test::identical(audio_before, audio_after));
    EXPECT_TRUE(test::identical(z_before, z_after));
}

// The setting of whether streams batch goes with the weights to the
// network that shares them.
TEST_P(VitsSpeakerWeights, a_shared_network_batches_as_the_one_it_was_made_from) {
    const auto flow = voice_->flow_network(0);
    flow->set_join_streams(false);
    const VitsFlowNetwork off(flow, flow->speaker_biases());
    EXPECT_EQ(off.joiner(), nullptr);
    flow->set_join_streams(true);
    const VitsFlowNetwork on(flow, flow->speaker_biases());
    EXPECT_NE(on.joiner(), nullptr);
    const auto decoder = load_vits_decoder(voice_->weights(), kSampleRate, 0, "base", backend_);
    const auto bias = vits_decoder_input_bias(voice_->weights(), 2);
    decoder->set_join_streams(false);
    EXPECT_EQ(NeuralModel::sharing_weights(decoder, bias)->joiner(), nullptr);
    decoder->set_join_streams(true);
    EXPECT_NE(NeuralModel::sharing_weights(decoder, bias)->joiner(), nullptr);
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
    EXPECT_THROW(NeuralModel::sharing_weights(nullptr, three), std::invalid_argument);
    EXPECT_THROW(VitsFlowNetwork(nullptr, biases), std::invalid_argument);
    EXPECT_THROW(voice_->decoder(voice_->num_speakers()), Error);
    EXPECT_THROW(voice_->flow_network(-1), Error);
}

// The voice's first flow is made at open; of the flow's original weights
// the voice then keeps only what folds a speaker into the biases (each
// WaveNet layer's input bias, the conditioning layers: for a full-size
// medium voice with 512-wide speaker embeddings, 13 of 41 MB), and every
// speaker's flow can still be made.
TEST(VitsSpeakerWeightsHeld, a_voice_keeps_of_the_flows_originals_only_what_folds_a_speaker) {
    const auto voice = VitsVoice::open(kVoice, kSampleRate, gpu::shared_cpu_backend());
    std::size_t all = 0, kept = 0;
    for (const VitsTensor& t : voice->weights().tensors) {
        if (t.role.rfind("flow.", 0) != 0) continue;
        std::size_t n = 1;
        for (const auto d : t.dims) n *= std::size_t(d);
        all += n;
        kept += t.values.size();
        if (!t.released) {
            EXPECT_TRUE(t.role.find(".enc.cond_layer.") != std::string::npos ||
                        (t.role.find(".enc.in_layers.") != std::string::npos &&
                         t.role.find(".bias") != std::string::npos))
                << t.role << " was kept";
        }
    }
    ASSERT_GT(all, 0u);
    EXPECT_LT(kept, all / 2) << kept << " of " << all << " floats kept";
    for (int s = 0; s < voice->num_speakers(); ++s)
        EXPECT_EQ(voice->flow_network(s)->speaker_biases(),
                  VitsFlowNetwork::speaker_biases(read_vits_weights(kVoice), s));
}

INSTANTIATE_TEST_SUITE_P(Backends, VitsSpeakerWeights,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Vulkan, gpu::BackendKind::Cuda),
                         [](const auto& info) { return gpu::to_string(info.param); });

}  // namespace
}  // namespace etude::engine
