// Piper's text encoder on a backend (VitsTextEncoderNetwork) against the
// host's (VitsTextToLatent::encode, the encoder PyTorch parity is proven
// with in vits_parity_test.cpp): m_p, logs_p and the hidden signal for
// every test voice and sentences of 1 phoneme, within the attention's
// window, just past it, and long, on the CPU backend, OpenCL (PoCL),
// Vulkan (lavapipe) and CUDA where there is one.
//
// The tolerance comes from float rounding, not from what a device gave
// (support/text_encoder_bound.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/error.h"
#include "engine/models/vits/text_encoder_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_voice.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/test_data.h"
#include "support/text_encoder_bound.h"

namespace etude::engine {
namespace {

using test::backend_of;
using test::max_abs_diff;

const std::string kData = test::test_data_dir() + "/piper/";
// 1 phoneme; 4 (inside the window of 4 either side); 5 and 9 (just past
// it, and past its whole width); the reference sentence (35); and 120.
std::vector<std::vector<std::int64_t>> sentences() {
    std::vector<std::vector<std::int64_t>> out;
    for (std::size_t n : {std::size_t(1), std::size_t(4), std::size_t(5), std::size_t(9),
                          std::size_t(35), std::size_t(120)})
        out.push_back(test::piper_ids_of_length(n));
    return out;
}

double max_diff(const VitsEncoding& a, const VitsEncoding& b) {
    return test::encoding_diff(a, b);
}

double bound_for(const VitsHyperparameters& hp, double one_rounding) {
    return test::encoder_bound(hp, one_rounding);
}

using test::one_rounding_change;

class VitsTextEncoder : public test::OnBackend {
  protected:
    VitsTextEncoder() : OnBackend(" — the device text encoder tests are skipped here") {}
};

TEST_P(VitsTextEncoder, equals_the_host_encoder_for_every_voice_and_sentence_length) {
    const auto all = sentences();
    for (const char* name : test::kPiperTestVoices) {
        SCOPED_TRACE(name);
        const auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"));
        const VitsTextToLatent host(w);
        const VitsTextEncoderNetwork device(*w, backend_);
        for (const auto& ids : all) {
            const VitsEncoding want = host.encode(ids);
            const VitsEncoding got = device.encode(ids);
            ASSERT_EQ(got.phonemes, int(ids.size()));
            ASSERT_EQ(got.stats.size(), want.stats.size());
            ASSERT_EQ(got.hidden.size(), want.hidden.size());
            const double diff = max_diff(got, want);
            const double bound = bound_for(w->hp, one_rounding_change(*w, ids, want));
            std::printf("[ %-8s ] %-18s %3zu ids: max |device - host| = %.3g (bound %.3g)\n",
                        gpu::to_string(GetParam()), name, ids.size(), diff, bound);
            EXPECT_LE(diff, bound) << ids.size() << " ids";
        }
    }
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

// A batch pads its sentences to the longest and masks the padding: each
// sentence equals its solo encoding to float rounding (the bound above),
// and where every op sums in a fixed order (the shared kernel bodies of
// OpenCL and Vulkan; CUDA's GEMMs are cuBLAS's: test::batch_keeps_bits) bit
// for bit.
TEST_P(VitsTextEncoder, sentences_in_one_call_each_equal_their_solo_encoding) {
    const auto w =
        std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    const VitsTextToLatent host(w);
    const VitsTextEncoderNetwork device(*w, backend_);
    const auto all = sentences();
    std::vector<std::span<const std::int64_t>> batch;
    // Long and short mixed, one twice.
    for (std::size_t i : {5, 0, 3, 1, 5, 4}) batch.emplace_back(all[i]);
    const auto together = device.encode(batch);
    ASSERT_EQ(together.size(), batch.size());
    const bool fixed_order = test::batch_keeps_bits(GetParam());
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const VitsEncoding solo = device.encode(batch[i]);
        ASSERT_EQ(together[i].phonemes, solo.phonemes);
        const double diff = max_diff(together[i], solo);
        const double bound =
            bound_for(w->hp, one_rounding_change(*w, batch[i], host.encode(batch[i])));
        std::printf("[ %-8s ] sentence %zu of the batch (%3zu ids): max |batched - solo| = %.3g\n",
                    gpu::to_string(GetParam()), i, batch[i].size(), diff);
        EXPECT_LE(diff, bound) << "sentence " << i;
        if (fixed_order) {
            EXPECT_EQ(diff, 0.0) << "sentence " << i;
        }
    }
}

TEST_P(VitsTextEncoder, no_ids_or_an_id_outside_the_table_is_refused_before_the_device) {
    const auto w =
        std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    const VitsTextEncoderNetwork device(*w, backend_);
    const std::vector<std::int64_t> none, too_big{1, 0, w->hp.num_symbols, 2}, negative{1, -1};
    EXPECT_THROW(device.encode(none), etude::Error);
    EXPECT_THROW(device.encode(too_big), etude::Error);
    EXPECT_THROW(device.encode(negative), etude::Error);
    // One bad sentence refuses the whole call.
    const std::vector<std::int64_t> ok{1, 0, 20, 0, 2};
    const std::span<const std::int64_t> mixed[] = {ok, too_big};
    EXPECT_THROW(device.encode(std::span<const std::span<const std::int64_t>>(mixed)),
                 etude::Error);
    try {
        device.encode(too_big);
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("outside the voice's"), std::string::npos) << e.what();
    }
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

// The encoder's output feeds the host's durations and prior as the host's
// own does: the same durations, and a prior within the encoder's bound.
TEST_P(VitsTextEncoder, the_prior_from_the_device_encoding_has_the_host_durations) {
    const auto ids = test::piper_reference_ids();
    for (const char* name : test::kPiperTestVoices) {
        SCOPED_TRACE(name);
        const auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"));
        const VitsTextToLatent host(w);
        const VitsTextEncoderNetwork device(*w, backend_);
        const VitsScales scales{0.667f, 1.2f, 0.8f};
        std::mt19937_64 a(5), b(5);
        VitsPrior want = host.prior(ids, 1, scales, a);
        VitsPrior got = host.prior(device.encode(ids), 1, scales, b);
        EXPECT_EQ(got.durations(), want.durations());
        ASSERT_EQ(got.frames(), want.frames());
        const double bound = bound_for(w->hp, one_rounding_change(*w, ids, host.encode(ids)));
        // The prior's noise is multiplied by exp(logs) * 0.667: a few times
        // the encoder's own bound at most for these voices' deviations.
        EXPECT_LE(max_abs_diff(got.sample_all(), want.sample_all()), 4 * bound);
        EXPECT_EQ(a(), b());  // the same noise drawn
    }
}

TEST_P(VitsTextEncoder, a_voice_on_a_device_encodes_there_and_speaks_as_on_the_cpu) {
    const auto ids = test::piper_reference_ids();
    const auto on_cpu =
        VitsVoice::open(kData + "test_medium_multi.onnx", 22050, gpu::shared_cpu_backend());
    const auto here = VitsVoice::open(kData + "test_medium_multi.onnx", 22050, backend_);
    EXPECT_EQ(here->encodes_on_device(), GetParam() != gpu::BackendKind::Cpu);
    EXPECT_FALSE(on_cpu->encodes_on_device());
    const auto want = on_cpu->render(ids, 2, {}, 42);
    const auto got = here->render(ids, 2, {}, 42);
    ASSERT_EQ(got.size(), want.size());
    // vits_parity_test.cpp's bound for a voice against PyTorch.
    const double diff = max_abs_diff(got, want);
    std::printf("[ %-8s ] voice render, noise on: max |here - cpu| = %.3g\n",
                gpu::to_string(GetParam()), diff);
    EXPECT_LE(diff, 1e-4);
    // Streamed a chunk at a time, the sentence stream says the same.
    VitsSentenceStream stream(here, 42);
    stream.start(ids, 2, {});
    std::vector<float> streamed;
    while (!stream.done()) {
        const auto part = stream.next(16);
        streamed.insert(streamed.end(), part.begin(), part.end());
    }
    ASSERT_EQ(streamed.size(), want.size());
    EXPECT_LE(max_abs_diff(streamed, want), 1e-4);
}

TEST(VitsTextEncoderWeights, a_voice_whose_encoder_weights_were_released_is_refused_clearly) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_x_low.onnx"));
    w->release("enc_p.encoder.ffn_layers.");
    try {
        VitsTextEncoderNetwork device(*w, gpu::shared_cpu_backend());
        FAIL() << "built from released weights";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("ffn_layers"), std::string::npos) << e.what();
    }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, VitsTextEncoder,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace etude::engine
