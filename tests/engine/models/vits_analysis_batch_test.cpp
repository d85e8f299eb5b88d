// Several streams' sentences analysed on a backend in one batch
// (VitsAnalysisNetwork::joiner(): one encoder call and one duration call
// for all of them), each sentence on a thread of its own as the streams'
// front-end workers call it: each gives its solo device prior (the same
// durations and noise drawn; the prior bit for bit where the device's ops
// sum in a fixed order, else within the encoder's rounding bound); a
// duration near a tie sends only its own sentence to the host; a device
// error reaches every sentence of the batch, each generator untouched, and
// an out-of-memory halves the batches after it. On the CPU backend, OpenCL
// (PoCL), Vulkan (lavapipe) and CUDA where there is one; joining is on by
// default on a GPU only, so the tests switch it on, and the joiner's
// pause() makes the batches certain rather than a matter of timing.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_analysis_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "support/duration_tie.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/piper_test_ids.h"
#include "support/test_data.h"
#include "support/text_encoder_bound.h"

namespace etude::engine {
namespace {

using Outcome = VitsAnalysisNetwork::Outcome;
using Result = VitsAnalysisNetwork::Result;

// Three streams' sentences of 20, 90 and 35 ids (padded to the longest in
// the batch); speakers 0, 2 and 1 of the multi-speaker test voice, each
// stream's own seed.
struct Sentence {
    std::vector<std::int64_t> ids;
    int speaker = 0;
    std::uint64_t seed = 0;
    VitsScales scales;
};

std::vector<Sentence> three_sentences() {
    return {{test::piper_ids_of_length(20), 0, 21, {}},
            {test::piper_ids_of_length(90), 2, 22, {}},
            {test::piper_test_sentences()[1], 1, 23, {}}};
}

// The next draws of a generator, to tell whether it moved and how far.
std::vector<std::uint64_t> next_draws(std::mt19937_64 g) {
    return {g(), g(), g()};
}

class VitsAnalysisBatch : public test::OnBackend {
  protected:
    void SetUp() override {
        OnBackend::SetUp();
        if (IsSkipped()) return;
        w_ = std::make_shared<VitsWeights>(
            read_vits_weights(test::test_data_dir() + "/piper/test_medium_multi.onnx"));
        host_ = std::make_unique<VitsTextToLatent>(w_);
        device_ = std::make_unique<VitsAnalysisNetwork>(*w_, backend_);
        device_->set_join_streams(true);
    }
    void TearDown() override {
        if (!backend_) return;
        backend_->inject_fault({});  // nothing left over for later tests
        backend_->reset_health();
    }
    // Each sentence on a thread of its own, every one held in the paused
    // joiner until all of them wait there, so that one batch holds them all;
    // `inside` runs before the batch does. Each generator as it is left.
    std::vector<Result> together(
        const std::vector<Sentence>& text, std::vector<std::mt19937_64>& noise,
        const std::function<void()>& inside = [] {}) {
        auto& joiner = *device_->joiner();
        std::vector<Result> got(text.size());
        noise.clear();
        for (const auto& s : text) noise.emplace_back(s.seed);
        joiner.pause();
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < text.size(); ++i)
            threads.emplace_back([&, i] {
                got[i] =
                    device_->prior(*host_, text[i].ids, text[i].speaker, text[i].scales, noise[i]);
            });
        test::wait_until([&] { return joiner.waiting() == text.size(); });
        EXPECT_EQ(joiner.waiting(), text.size());
        inside();
        joiner.resume();
        for (auto& t : threads) t.join();
        return got;
    }
    Result solo(const Sentence& s, std::mt19937_64& noise) const {
        noise.seed(s.seed);
        return device_->prior(*host_, s.ids, s.speaker, s.scales, noise, Batching::Alone);
    }
    // A sentence of the batch against its solo device analysis.
    void expect_its_solo_prior(const Sentence& s, Result& got, const std::mt19937_64& noise) {
        std::mt19937_64 solo_noise;
        Result want = solo(s, solo_noise);
        ASSERT_EQ(want.outcome, Outcome::OnDevice) << want.error;
        EXPECT_EQ(want.batch, 1u);
        ASSERT_EQ(got.outcome, Outcome::OnDevice) << got.error;
        ASSERT_TRUE(got.prior);
        EXPECT_TRUE(got.prior->complete());
        EXPECT_EQ(got.prior->durations(), want.prior->durations());
        ASSERT_EQ(got.prior->frames(), want.prior->frames());
        EXPECT_EQ(next_draws(noise), next_draws(solo_noise)) << "the same noise drawn";
        const double diff = test::max_abs_diff(got.prior->sample_all(), want.prior->sample_all());
        const double bound = 4 * test::encoder_bound(w_->hp, test::one_rounding_change(
                                                                 *w_, s.ids, host_->encode(s.ids)));
        std::printf("[ %-8s ] %3zu ids, speaker %d: max |batched - solo| = %.3g (bound %.3g)\n",
                    gpu::to_string(GetParam()), s.ids.size(), s.speaker, diff, bound);
        // The shared kernel bodies sum in a fixed order, so a batch gives
        // each sentence its solo bits; SGEMM and cuBLAS may block a padded
        // product otherwise (the encoder's own test's bound).
        if (test::batch_keeps_bits(GetParam()))
            EXPECT_EQ(diff, 0.0);
        else
            EXPECT_LE(diff, bound);
    }

    std::shared_ptr<VitsWeights> w_;
    std::unique_ptr<VitsTextToLatent> host_;
    std::unique_ptr<VitsAnalysisNetwork> device_;
};

TEST_P(VitsAnalysisBatch, sentences_meeting_in_a_batch_each_give_their_solo_prior) {
    const auto text = three_sentences();
    std::vector<std::mt19937_64> noise;
    auto got = together(text, noise);
    const JoinStats st = device_->joiner()->stats();
    EXPECT_EQ(st.batches, 1u);
    EXPECT_EQ(st.largest, 3u);
    for (std::size_t i = 0; i < text.size(); ++i) {
        SCOPED_TRACE("sentence " + std::to_string(i));
        EXPECT_EQ(got[i].batch, 3u);
        expect_its_solo_prior(text[i], got[i], noise[i]);
    }
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

// Sentence 1's length scale puts one of its phonemes on a whole frame: it
// alone goes to the host, its generator untouched; the others are the
// device's, each its solo prior.
TEST_P(VitsAnalysisBatch, a_near_tie_in_one_sentence_sends_only_that_one_to_the_host) {
    auto text = three_sentences();
    const VitsDurationNetwork durations(*w_, backend_);
    text[1].scales.length_scale =
        test::tie_length_scale(*host_, durations, text[1].ids, text[1].speaker, text[1].seed, 9);
    std::vector<std::mt19937_64> noise;
    auto got = together(text, noise);
    EXPECT_EQ(got[1].outcome, Outcome::NearTie);
    EXPECT_EQ(got[1].batch, 3u);
    EXPECT_FALSE(got[1].prior);
    EXPECT_EQ(next_draws(noise[1]), next_draws(std::mt19937_64(text[1].seed)));
    for (std::size_t i : {0, 2}) {
        SCOPED_TRACE("sentence " + std::to_string(i));
        expect_its_solo_prior(text[i], got[i], noise[i]);
    }
}

// A failed launch (after the batch's first operations) or an out-of-memory
// inside the batch: every sentence of it is a DeviceError naming the
// batch, no prior, its generator untouched (the host then draws the same
// noise). After an out-of-memory the batches take half as many.
TEST_P(VitsAnalysisBatch, a_device_error_in_a_batch_reaches_every_sentence_of_it) {
    const auto text = three_sentences();
    for (const auto kind : {gpu::GpuFault::KernelFailure, gpu::GpuFault::OutOfMemory}) {
        SCOPED_TRACE(kind == gpu::GpuFault::KernelFailure ? "kernel" : "oom");
        device_ = std::make_unique<VitsAnalysisNetwork>(*w_, backend_);
        device_->set_join_streams(true);
        std::vector<std::mt19937_64> noise;
        auto got = together(text, noise, [&] { backend_->inject_fault({kind, 1, 0, 30}); });
        backend_->inject_fault({});
        backend_->reset_health();
        for (std::size_t i = 0; i < text.size(); ++i) {
            SCOPED_TRACE("sentence " + std::to_string(i));
            EXPECT_EQ(got[i].outcome, Outcome::DeviceError);
            EXPECT_FALSE(got[i].prior);
            EXPECT_NE(got[i].error.find("a batch of 3 sentences failed"), std::string::npos)
                << got[i].error;
            EXPECT_EQ(next_draws(noise[i]), next_draws(std::mt19937_64(text[i].seed)));
        }
        const JoinStats st = device_->joiner()->stats();
        EXPECT_EQ(st.batches, 1u);
        EXPECT_EQ(st.out_of_memory, kind == gpu::GpuFault::OutOfMemory ? 1u : 0u);
        EXPECT_EQ(st.cap, kind == gpu::GpuFault::OutOfMemory ? 1u : 0u);
        // The device is whole again: the next sentence is its own.
        std::mt19937_64 g;
        EXPECT_EQ(solo(text[0], g).outcome, Outcome::OnDevice);
    }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, VitsAnalysisBatch,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace etude::engine
