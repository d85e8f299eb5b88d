// Piper's stochastic duration predictor on a backend (VitsDurationNetwork)
// against the host's (duration_predictor.cpp, the predictor PyTorch parity
// is proven with in vits_parity_test.cpp): each phoneme's log duration and
// the frames it lasts, for every test voice, sentences of 1 phoneme to past
// the staged prior's window, noise on and off, on the CPU backend, OpenCL
// (PoCL), Vulkan (lavapipe) and CUDA where there is one. Both read the same
// encoding (the host encoder's) and the same noise (drawn from one seed).
//
// The tolerance comes from float rounding, not from what a device gave:
// the host predictor is run again with every value of its input (the
// encoding and the noise) moved by one float rounding (times 1 +- 2^-24,
// signs at random), and the largest change of its log durations, E1, is
// how far one rounding of the signal moves the result (the spline's
// inverse, whose slope reaches 1000, included). The device rounds its
// signal once per operation: S of them in sequence (per DDSConv layer the
// depthwise convolution, two norms, two GELUs, the 1x1 convolution, its
// bias and the residual sum: 8, three layers to a stack, a stack before the
// flows and one in each; around them the input and output convolutions and
// per flow its input convolution, bias, sum, projection, bias and spline:
// 6), each a sum of at most K = hidden products whose rounding is about
// sqrt(K) times one. So the bound is 2 * S * sqrt(K) * E1 (2: the host
// rounds too), and a wrong index, a missed layer or a swapped Flip moves
// the log durations by O(1).
//
// The durations are ceil(exp(logw) * length_scale): a float difference can
// move one where exp(logw) * length_scale lies that near a whole frame, and
// the bound above is far too loose to rule that out (long sentences have
// phonemes within 1e-4 of a whole frame, the bound reaches 1e-2). So
// VitsTextToLatent settles every phoneme within kDurationTieMargin of a
// whole frame on the host; the test checks that the device's difference
// stays below half that margin for every input here (so outside it no
// ceiling can move), and that the prior made with the device's log
// durations has the host's frame counts and draws the same noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/error.h"
#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/text_to_latent_network.h"
#include "support/model_parity.h"
#include "support/piper_test_ids.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

using test::backend_of;
using vits_host::Signal;

const std::string kData = test::test_data_dir() + "/piper/";
// 1, 2 and 5 phonemes; the reference sentence (35); 120, and 200 (past the
// staged prior's window of 48 + 65).
std::vector<std::vector<std::int64_t>> sentences() {
    std::vector<std::vector<std::int64_t>> out;
    for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(35),
                          std::size_t(120), std::size_t(200)})
        out.push_back(test::piper_ids_of_length(n));
    return out;
}

Signal signal_of(int channels, int length, const std::vector<float>& v) {
    Signal s(channels, length);
    s.v.assign(v.begin(), v.end());
    return s;
}

std::vector<double> speaker_vector(const VitsWeights& w, int speaker) {
    if (w.hp.num_speakers <= 1) return {};
    const auto& emb = w.get("emb_g.weight").values;
    const int gin = w.hp.gin_channels;
    return {emb.begin() + std::ptrdiff_t(speaker) * gin,
            emb.begin() + std::ptrdiff_t(speaker + 1) * gin};
}

// The host's log durations for an encoding and noise.
std::vector<double> host_log_durations(const VitsWeights& w, const VitsEncoding& e,
                                       const Signal& noise, int speaker) {
    const vits_host::TextToLatentNetwork net(w, {});
    const auto g = speaker_vector(w, speaker);
    return net.log_durations(signal_of(w.hp.hidden_channels, e.phonemes, e.hidden),
                             g.empty() ? nullptr : &g, noise);
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
}

// E1 and the bound of the top of this file.
double bound_for(const VitsWeights& w, const VitsEncoding& e, const Signal& noise, int speaker,
                 const std::vector<double>& host) {
    std::mt19937 rng(7);
    VitsEncoding moved = e;
    for (float& v : moved.hidden) v *= (rng() & 1) ? 1.0f + 0x1p-24f : 1.0f - 0x1p-24f;
    Signal moved_noise = noise;
    for (double& v : moved_noise.v) v *= (rng() & 1) ? 1.0 + 0x1p-24 : 1.0 - 0x1p-24;
    const double one_rounding = max_diff(host_log_durations(w, moved, moved_noise, speaker), host);
    const int stages = 8 * 3 * (1 + w.hp.dp_flows) + 2 + 6 * w.hp.dp_flows;
    return 2.0 * stages * std::sqrt(double(w.hp.hidden_channels)) * one_rounding;
}

class VitsDurationNetworkTest : public test::OnBackend {
  protected:
    VitsDurationNetworkTest() : OnBackend(" — the device duration tests are skipped here") {}
};

TEST_P(VitsDurationNetworkTest, equals_the_host_predictor_for_every_voice_length_and_noise) {
    const auto all = sentences();
    int sentences = 0, to_host = 0;
    for (const char* name : test::kPiperTestVoices) {
        SCOPED_TRACE(name);
        const auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"));
        const VitsTextToLatent host(w);
        const VitsDurationNetwork device(*w, backend_);
        const bool multi = w->hp.num_speakers > 1;
        const int speaker = multi ? 2 : 0;
        const double length_scale = multi ? 1.2 : 1.0;
        for (const auto& ids : all) {
            const VitsEncoding e = host.encode(ids);
            for (double noise_w : {0.0, 0.8}) {
                std::mt19937_64 rng(11 + ids.size());
                const Signal noise =
                    vits_host::TextToLatentNetwork::duration_noise(e.phonemes, noise_w, rng);
                const auto want = host_log_durations(*w, e, noise, speaker);
                const auto got = device.log_durations(e, noise.v, speaker);
                ASSERT_EQ(got.size(), want.size());
                const double diff = max_diff(got, want);
                const double bound = bound_for(*w, e, noise, speaker, want);
                // The phonemes whose frames lie within the tie margin of a
                // whole frame: VitsTextToLatent gives those sentences to the
                // host.
                int near_ties = 0;
                for (double l : got) {
                    const double d = std::exp(l) * length_scale, whole = std::round(d);
                    near_ties += whole > 0 && std::fabs(d - whole) <=
                                                  VitsTextToLatent::kDurationTieMargin * whole;
                }
                std::printf(
                    "[ %-8s ] %-18s %3zu ids noise %.1f: max |device - host| logw = %.3g (bound "
                    "%.3g), %d near a tie\n",
                    gpu::to_string(GetParam()), name, ids.size(), noise_w, diff, bound, near_ties);
                EXPECT_LE(diff, bound) << ids.size() << " ids, noise_w " << noise_w;
                // The tie margin is at least twice any difference: outside
                // it no ceiling can move, inside it the host decides.
                EXPECT_LE(diff, VitsTextToLatent::kDurationTieMargin / 2);
                sentences += 1;
                to_host += near_ties > 0;
                // Through the prior: the host's frame counts, the same noise.
                const VitsScales scales{0.667f, float(length_scale), float(noise_w)};
                const VitsLogDurations on_device = [&](const VitsEncoding& en,
                                                       std::span<const double> z) {
                    return device.log_durations(en, z, speaker);
                };
                std::mt19937_64 a(5), b(5);
                const VitsPrior from_device = host.prior(e, speaker, scales, a, on_device);
                const VitsPrior from_host = host.prior(e, speaker, scales, b);
                EXPECT_EQ(from_device.durations(), from_host.durations());
                EXPECT_EQ(a(), b());
            }
        }
    }
    std::printf("[ %-8s ] %d of %d sentences had a phoneme near a tie (the host's durations)\n",
                gpu::to_string(GetParam()), to_host, sentences);
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

// The predictor is convolutional with a known reach: over the staged
// prior's window (its first 48 phonemes and the reach beyond) the device
// gives those phonemes' log durations as over the whole sentence.
TEST_P(VitsDurationNetworkTest, the_staged_window_gives_the_first_durations_of_the_whole) {
    const auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium.onnx"));
    const VitsTextToLatent host(w);
    const VitsDurationNetwork device(*w, backend_);
    const auto ids = sentences().back();  // 200
    const VitsEncoding e = host.encode(ids);
    std::mt19937_64 rng(3);
    const Signal noise = vits_host::TextToLatentNetwork::duration_noise(e.phonemes, 0.8, rng);
    const int window = VitsTextToLatent::kStagedPhonemes + host.duration_reach();
    ASSERT_LT(window, e.phonemes);
    VitsEncoding part;
    part.phonemes = window;
    Signal part_noise(2, window);
    for (int c = 0; c < w->hp.hidden_channels; ++c)
        for (int i = 0; i < window; ++i)
            part.hidden.push_back(e.hidden[std::size_t(c) * e.phonemes + i]);
    for (int c = 0; c < 2; ++c)
        for (int i = 0; i < window; ++i) part_noise.row(c)[i] = noise.row(c)[i];
    const auto whole = device.log_durations(e, noise.v, 0);
    const auto staged = device.log_durations(part, part_noise.v, 0);
    const auto want = host_log_durations(*w, e, noise, 0);
    const double bound = bound_for(*w, e, noise, 0, want);
    for (int i = 0; i < VitsTextToLatent::kStagedPhonemes; ++i)
        EXPECT_NEAR(staged[std::size_t(i)], whole[std::size_t(i)], bound) << "phoneme " << i;
}

// A batch lays its sentences end to end with masked gaps: each equals its
// solo log durations within the bound above, and where every op sums in a
// fixed order (the shared kernel bodies of OpenCL and Vulkan; CUDA's GEMMs
// are cuBLAS's: test::batch_keeps_bits) bit for bit. Several speakers in
// one batch.
TEST_P(VitsDurationNetworkTest, sentences_in_one_call_each_equal_their_solo_durations) {
    const auto w =
        std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    const VitsTextToLatent host(w);
    const VitsDurationNetwork device(*w, backend_);
    const auto all = sentences();
    std::vector<VitsEncoding> encodings;
    std::vector<Signal> noises;
    std::vector<VitsDurationNetwork::Sentence> batch;
    // Long and short mixed, one twice, speakers 0 to 3.
    const std::size_t order[] = {5, 0, 3, 1, 5, 4, 2};
    for (std::size_t i : order) {
        encodings.push_back(host.encode(all[i]));
        std::mt19937_64 rng(20 + i);
        noises.push_back(
            vits_host::TextToLatentNetwork::duration_noise(encodings.back().phonemes, 0.8, rng));
    }
    for (std::size_t i = 0; i < encodings.size(); ++i)
        batch.push_back({&encodings[i], noises[i].v, int(i % 4)});
    const auto together = device.log_durations(batch);
    ASSERT_EQ(together.size(), batch.size());
    const bool fixed_order = test::batch_keeps_bits(GetParam());
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const auto solo = device.log_durations(encodings[i], noises[i].v, batch[i].speaker);
        const auto want = host_log_durations(*w, encodings[i], noises[i], batch[i].speaker);
        const double diff = max_diff(together[i], solo);
        std::printf("[ %-8s ] sentence %zu of the batch (%3d ids): max |batched - solo| = %.3g\n",
                    gpu::to_string(GetParam()), i, encodings[i].phonemes, diff);
        EXPECT_LE(diff, bound_for(*w, encodings[i], noises[i], batch[i].speaker, want))
            << "sentence " << i;
        if (fixed_order) {
            EXPECT_EQ(diff, 0.0) << "sentence " << i;
        }
    }
    // One bad sentence refuses the whole call.
    VitsEncoding broken = encodings[0];
    broken.hidden.pop_back();
    batch[2].encoding = &broken;
    EXPECT_THROW(device.log_durations(batch), etude::Error);
    EXPECT_TRUE(device.log_durations(std::span<const VitsDurationNetwork::Sentence>()).empty());
}

TEST_P(VitsDurationNetworkTest, bad_input_is_refused_before_the_device) {
    const auto w =
        std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    const VitsTextToLatent host(w);
    const VitsDurationNetwork device(*w, backend_);
    const VitsEncoding e = host.encode(test::piper_reference_ids());
    const std::vector<double> noise(2 * std::size_t(e.phonemes), 0.0);
    EXPECT_THROW(device.log_durations(e, std::span(noise).first(noise.size() - 1), 0),
                 etude::Error);
    EXPECT_THROW(device.log_durations(e, noise, -1), etude::Error);
    EXPECT_THROW(device.log_durations(e, noise, w->hp.num_speakers), etude::Error);
    VitsEncoding empty;
    EXPECT_THROW(device.log_durations(empty, {}, 0), etude::Error);
    VitsEncoding short_hidden = e;
    short_hidden.hidden.pop_back();
    EXPECT_THROW(device.log_durations(short_hidden, noise, 0), etude::Error);
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

TEST(VitsDurationNetworkWeights, a_voice_without_its_predictor_weights_is_refused_clearly) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_x_low.onnx"));
    w->release("dp.flows.");
    try {
        VitsDurationNetwork device(*w, gpu::shared_cpu_backend());
        FAIL() << "built from released weights";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("dp.flows."), std::string::npos) << e.what();
    }
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, VitsDurationNetworkTest,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace etude::engine
