// A sentence's text analysis on a backend (VitsAnalysisNetwork: the text
// encoder and the duration predictor there) against the host's prior: the
// same durations, the same noise drawn, a prior within the encoder's
// rounding bound (support/text_encoder_bound.h); a duration near a tie and
// a device error anywhere in the sentence leave the sentence to the host
// with the caller's generator untouched. On the CPU backend, OpenCL
// (PoCL), Vulkan (lavapipe) and CUDA where there is one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_analysis_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "support/duration_tie.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/test_data.h"
#include "support/text_encoder_bound.h"

namespace etude::engine {
namespace {

using test::backend_of;
using test::max_abs_diff;

const std::string kData = test::test_data_dir() + "/piper/";

struct Voice {
    explicit Voice(const std::string& name)
        : w(std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"))), host(w) {}
    std::shared_ptr<VitsWeights> w;
    VitsTextToLatent host;
};

// The next draws of a generator, to tell whether it moved.
std::vector<std::uint64_t> next_draws(std::mt19937_64 g) {
    return {g(), g(), g()};
}

class VitsAnalysis : public test::OnBackend {
  protected:
    VitsAnalysis() : OnBackend(" — the device text analysis tests are skipped here") {}
};

TEST_P(VitsAnalysis, gives_the_hosts_durations_noise_and_prior_within_the_encoders_bound) {
    int on_device = 0;
    for (const char* name : {"test_medium", "test_medium_multi"}) {
        SCOPED_TRACE(name);
        const Voice v(name);
        const VitsAnalysisNetwork device(*v.w, backend_);
        const int speaker = v.w->hp.num_speakers > 1 ? 2 : 0;
        for (const auto& ids : {test::piper_reference_ids(), test::piper_ids_of_length(120)})
            for (const auto& [length_scale, seed] :
                 {std::pair{1.0f, 5}, std::pair{1.2f, 5}, std::pair{1.0f, 6}, std::pair{1.2f, 6}}) {
                const VitsScales scales{0.667f, length_scale, 0.8f};
                std::mt19937_64 a(seed), b(seed);
                VitsPrior want = v.host.prior(ids, speaker, scales, a);
                auto got = device.prior(v.host, ids, speaker, scales, b);
                if (got.outcome == VitsAnalysisNetwork::Outcome::NearTie) {
                    // The host is to make it: nothing drawn here.
                    EXPECT_FALSE(got.prior);
                    EXPECT_EQ(next_draws(b), next_draws(std::mt19937_64(seed)));
                    continue;
                }
                ASSERT_EQ(got.outcome, VitsAnalysisNetwork::Outcome::OnDevice) << got.error;
                ASSERT_TRUE(got.prior);
                ++on_device;
                EXPECT_TRUE(got.prior->complete());
                EXPECT_EQ(got.prior->durations(), want.durations());
                ASSERT_EQ(got.prior->frames(), want.frames());
                const double bound = test::encoder_bound(
                    v.w->hp, test::one_rounding_change(*v.w, ids, v.host.encode(ids)));
                const double diff = max_abs_diff(got.prior->sample_all(), want.sample_all());
                std::printf("[ %-8s ] %-17s %3zu ids: max |prior - host's| = %.3g (bound %.3g)\n",
                            gpu::to_string(GetParam()), name, ids.size(), diff, 4 * bound);
                // As the encoder's own test: the prior's noise is multiplied
                // by exp(logs) * 0.667, a few times the encoder's bound.
                EXPECT_LE(diff, 4 * bound);
                EXPECT_EQ(next_draws(b), next_draws(a)) << "the same noise drawn";
            }
    }
    // A phoneme of d frames lies near a tie by chance about 2 * 2.5e-4 * d of
    // the time: a sentence of 120 phonemes of about 5 frames, one time in
    // four. (The seeds are fixed: 8 of these 16 here.)
    EXPECT_GE(on_device, 6) << "too few sentences far from a tie";
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

TEST_P(VitsAnalysis, a_duration_on_a_tie_leaves_the_sentence_to_the_host_and_the_noise_untouched) {
    const Voice v("test_medium_multi");
    const VitsAnalysisNetwork device(*v.w, backend_);
    const VitsDurationNetwork durations(*v.w, backend_);
    const auto ids = test::piper_reference_ids();
    for (std::size_t i : {std::size_t(3), std::size_t(17)}) {
        const float length_scale = test::tie_length_scale(v.host, durations, ids, 1, 9, i);
        SCOPED_TRACE(length_scale);
        std::mt19937_64 g(9);
        const auto got = device.prior(v.host, ids, 1, VitsScales{0.667f, length_scale, 0.8f}, g);
        EXPECT_EQ(got.outcome, VitsAnalysisNetwork::Outcome::NearTie);
        EXPECT_FALSE(got.prior);
        EXPECT_EQ(next_draws(g), next_draws(std::mt19937_64(9)));
    }
}

// A kernel failure at every few operations of a sentence's encoder and
// predictor: a DeviceError result naming it, no prior and the generator
// untouched (the host then draws the same noise); past the last operation
// the fault no longer fires and the prior is the device's.
TEST_P(VitsAnalysis, a_device_error_anywhere_leaves_the_sentence_to_the_host) {
    const Voice v("test_medium");
    const VitsAnalysisNetwork device(*v.w, backend_);
    const auto ids = test::piper_reference_ids();
    const VitsScales scales{0.667f, 1.2f, 0.8f};
    int failed = 0, made = 0;
    for (int after = 0; after < 600; after += 13) {
        backend_->reset_health();
        backend_->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, after});
        std::mt19937_64 g(3);
        const auto got = device.prior(v.host, ids, 0, scales, g);
        backend_->inject_fault({});
        if (backend_->health() != gpu::Health::Ok) {
            ++failed;
            EXPECT_EQ(got.outcome, VitsAnalysisNetwork::Outcome::DeviceError) << after;
            EXPECT_FALSE(got.error.empty());
            EXPECT_FALSE(got.prior);
            EXPECT_EQ(next_draws(g), next_draws(std::mt19937_64(3))) << after;
        } else {
            ++made;
            EXPECT_NE(got.outcome, VitsAnalysisNetwork::Outcome::DeviceError) << after;
        }
    }
    backend_->reset_health();
    std::printf("[ %-8s ] the fault fired in %d sentences; %d made without it\n",
                gpu::to_string(GetParam()), failed, made);
    EXPECT_GT(failed, 5);
    EXPECT_GT(made, 0) << "600 operations should cover a sentence's analysis";
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, VitsAnalysis,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace etude::engine
