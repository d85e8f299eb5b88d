// Durations made on a device, in use: VitsTextToLatent::prior with log
// durations from elsewhere (VitsLogDurations) rounds them up as the host
// does and settles a near tie on the host; VitsVoice on a device predicts
// its durations there (VitsDurationNetwork), with the host's frame counts,
// and speaks as on the CPU within the Piper bound; a device error leaves a
// sentence's durations to the host.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/error.h"
#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_voice.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

using test::backend_of;
using test::max_abs_diff;

const std::string kData = test::test_data_dir() + "/piper/";

std::vector<std::int64_t> reference_ids() {
    std::ifstream in(kData + "reference.json");
    return nlohmann::json::parse(in)["phoneme_ids"].get<std::vector<std::int64_t>>();
}

// The log durations of frames d, as a device would give them.
std::vector<double> log_of(const std::vector<double>& frames, double length_scale) {
    std::vector<double> out;
    for (double d : frames) out.push_back(std::log(d / length_scale));
    return out;
}

struct Fixture {
    std::shared_ptr<VitsWeights> w =
        std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    VitsTextToLatent host{w};
    std::vector<std::int64_t> ids = reference_ids();
    VitsEncoding encoding = host.encode(ids);
    VitsScales scales{0.667f, 1.2f, 0.8f};
};

TEST(VitsDeviceDurations, log_durations_from_elsewhere_are_rounded_up_as_the_host_does) {
    Fixture f;
    const int n = f.encoding.phonemes;
    // Far from every tie: 2.3, 2.8, 3.3, ... frames.
    std::vector<double> frames;
    for (int i = 0; i < n; ++i) frames.push_back(2.3 + 0.5 * (i % 24));
    int calls = 0;
    const VitsLogDurations given = [&](const VitsEncoding& e, std::span<const double> noise) {
        ++calls;
        EXPECT_EQ(e.phonemes, n);
        EXPECT_EQ(noise.size(), 2 * std::size_t(n));
        return log_of(frames, f.scales.length_scale);
    };
    std::mt19937_64 a(9), b(9);
    VitsPrior got = f.host.prior(f.encoding, 2, f.scales, a, given);
    EXPECT_EQ(calls, 1);
    std::vector<int> want;
    for (double d : frames) want.push_back(int(std::ceil(d)));
    EXPECT_EQ(got.durations(), want);
    EXPECT_TRUE(got.complete());
    // The same noise drawn as the host's own prior draws.
    f.host.prior(f.encoding, 2, f.scales, b);
    EXPECT_EQ(a(), b());
}

TEST(VitsDeviceDurations, a_near_tie_a_nan_or_no_answer_leaves_the_durations_to_the_host) {
    Fixture f;
    std::mt19937_64 r(4);
    const VitsPrior host = f.host.prior(f.encoding, 2, f.scales, r);
    const int n = f.encoding.phonemes;
    // Far from ties but wrong everywhere except phoneme 0, which sits a
    // hair above a whole frame (the ceiling a device's rounding could
    // move): the whole sentence then comes from the host.
    std::vector<double> frames(std::size_t(n), 5.5);
    frames[0] = 3.0 * (1 + 1e-7);
    const VitsLogDurations near_tie = [&](const VitsEncoding&, std::span<const double>) {
        return log_of(frames, f.scales.length_scale);
    };
    const VitsLogDurations none = [](const VitsEncoding&, std::span<const double>) {
        return std::vector<double>{};
    };
    const VitsLogDurations not_a_number = [&](const VitsEncoding&, std::span<const double>) {
        std::vector<double> l = log_of(std::vector<double>(std::size_t(n), 5.5), 1.0);
        l[1] = NAN;
        return l;
    };
    for (const VitsLogDurations* source : {&near_tie, &none, &not_a_number}) {
        std::mt19937_64 a(4);
        VitsPrior got = f.host.prior(f.encoding, 2, f.scales, a, *source);
        EXPECT_EQ(got.durations(), host.durations());
    }
    // Outside the margin the device's answer stands.
    frames[0] = 3.0 * (1 + 10 * VitsTextToLatent::kDurationTieMargin);
    std::mt19937_64 a(4);
    EXPECT_EQ(f.host.prior(f.encoding, 2, f.scales, a, near_tie).durations().front(), 4);
}

TEST(VitsDeviceDurations, a_wrong_count_of_log_durations_is_a_bug_not_a_result) {
    Fixture f;
    const VitsLogDurations short_by_one = [](const VitsEncoding& e, std::span<const double>) {
        return std::vector<double>(std::size_t(e.phonemes - 1), 1.0);
    };
    std::mt19937_64 a(4);
    EXPECT_THROW(f.host.prior(f.encoding, 2, f.scales, a, short_by_one), std::logic_error);
    // A bad speaker is refused before anything is asked.
    bool asked = false;
    const VitsLogDurations ask = [&](const VitsEncoding&, std::span<const double>) {
        asked = true;
        return std::vector<double>{};
    };
    EXPECT_THROW(f.host.prior(f.encoding, 7, f.scales, a, ask), etude::Error);
    EXPECT_FALSE(asked);
}

class VitsVoiceDurations : public test::OnBackend {
  protected:
    VitsVoiceDurations() : OnBackend(" — the device duration tests are skipped here") {}
};

TEST_P(VitsVoiceDurations, a_voice_on_a_device_predicts_durations_there_and_speaks_as_on_the_cpu) {
    const auto ids = reference_ids();
    const auto on_cpu =
        VitsVoice::open(kData + "test_medium_multi.onnx", 22050, gpu::shared_cpu_backend());
    const auto here = VitsVoice::open(kData + "test_medium_multi.onnx", 22050, backend_);
    EXPECT_EQ(here->encodes_on_device(), GetParam() != gpu::BackendKind::Cpu);
    for (const VitsScales scales : {VitsScales{}, VitsScales{0.667f, 1.2f, 0.8f}}) {
        std::mt19937_64 a(42), b(42);
        const VitsLatent want = on_cpu->latent(ids, 2, scales, a);
        const VitsLatent got = here->latent(ids, 2, scales, b);
        EXPECT_EQ(got.durations, want.durations);
        const auto want_audio = on_cpu->render(ids, 2, scales, 42);
        const auto got_audio = here->render(ids, 2, scales, 42);
        ASSERT_EQ(got_audio.size(), want_audio.size());
        // vits_parity_test.cpp's bound for a voice against PyTorch.
        const double diff = max_abs_diff(got_audio, want_audio);
        std::printf("[ %-8s ] voice render, durations here, noise on: max |here - cpu| = %.3g\n",
                    gpu::to_string(GetParam()), diff);
        EXPECT_LE(diff, 1e-4);
    }
    EXPECT_EQ(backend_->health(), gpu::Health::Ok) << backend_->last_error();
}

// A kernel failure anywhere in a sentence's encoder or predictor (the
// fault moved op by op through both): the sentence still gets the CPU
// voice's durations (the host's encoder, or the host's predictor on the
// device's encoding), and the noise drawn is the same.
TEST_P(VitsVoiceDurations, a_device_error_leaves_the_sentence_to_the_host_with_its_durations) {
    const auto ids = reference_ids();
    const auto on_cpu =
        VitsVoice::open(kData + "test_medium_multi.onnx", 22050, gpu::shared_cpu_backend());
    const auto here = VitsVoice::open(kData + "test_medium_multi.onnx", 22050, backend_);
    const VitsScales scales{0.667f, 1.2f, 0.8f};
    std::mt19937_64 a(8);
    const VitsPrior want = on_cpu->prior(ids, 2, scales, a);
    const auto next_draw = a();
    // Past the last one the fault no longer fires: every op was covered.
    int fired = 0, last_fired = -1;
    for (int after = 0; after < 500; after += 11) {
        backend_->reset_health();
        backend_->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, after});
        std::mt19937_64 b(8);
        const VitsPrior got = here->prior(ids, 2, scales, b);
        EXPECT_EQ(got.durations(), want.durations()) << "a fault after " << after << " ops";
        EXPECT_EQ(b(), next_draw) << "a fault after " << after << " ops";
        if (backend_->health() != gpu::Health::Ok) {
            ++fired;
            last_fired = after;
        }
        backend_->inject_fault({});
    }
    backend_->reset_health();
    if (GetParam() != gpu::BackendKind::Cpu) {
        std::printf("[ %-8s ] the fault fired in %d sentences, the last after %d ops\n",
                    gpu::to_string(GetParam()), fired, last_fired);
        EXPECT_GT(fired, 0);
        EXPECT_LT(last_fired, 500 - 11);
    }
}

// A kernel that fails inside the predictor: a gpu::DeviceError from the
// network (which VitsVoice turns into the host's durations), no crash.
TEST_P(VitsVoiceDurations, a_device_error_in_the_predictor_is_a_device_error) {
    Fixture f;
    const VitsDurationNetwork device(*f.w, backend_);
    const std::vector<double> noise(2 * std::size_t(f.encoding.phonemes), 0.1);
    backend_->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, 5});
    EXPECT_THROW(device.log_durations(f.encoding, noise, 2), gpu::DeviceError);
    backend_->inject_fault({});
    backend_->reset_health();
    EXPECT_EQ(device.log_durations(f.encoding, noise, 2).size(), std::size_t(f.encoding.phonemes));
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, VitsVoiceDurations,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

}  // namespace etude::engine
