// Piper voices (VITS) against PyTorch: for the reference phoneme ids with
// noise_scale = noise_w = 0, the engine's text-to-latent network and its
// HiFi-GAN decoder on each backend make the audio tools/piper_reference
// stored (PyTorch, float64) within 1e-4, with the same durations; and the
// decoder streamed in chunks of 1 to 64 frames equals the whole sentence
// within 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "audio-io/npy_file.h"
#include "engine/error.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_voice.h"
#include "gpu/registry.h"
#include "support/emulation.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

using test::backend_of;
using test::max_abs_diff;

const std::string kData = test::test_data_dir() + "/piper/";

nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

struct Voice {
    std::string name;
    std::shared_ptr<const VitsWeights> weights;
    int sample_rate = 0;
    int speaker = 0;
    float length_scale = 1;
    std::vector<int> durations;
    std::vector<float> audio;
};

std::vector<std::int64_t> reference_ids() {
    return read_json(kData + "reference.json")["phoneme_ids"].get<std::vector<std::int64_t>>();
}

std::vector<Voice> voices() {
    std::vector<Voice> out;
    const auto ref = read_json(kData + "reference.json");
    for (const auto& [name, v] : ref["voices"].items()) {
        Voice voice;
        voice.name = name;
        voice.weights = std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"));
        voice.sample_rate =
            read_json(kData + name + ".onnx.json")["audio"]["sample_rate"].get<int>();
        voice.speaker = v["speaker_id"].is_null() ? 0 : v["speaker_id"].get<int>();
        voice.length_scale = v["length_scale"].get<float>();
        voice.durations = v["durations"].get<std::vector<int>>();
        voice.audio = audio_io::read_npy(kData + v["audio"].get<std::string>()).data;
        out.push_back(std::move(voice));
    }
    return out;
}

class VitsParity : public test::OnBackend {
  protected:
    VitsParity() : OnBackend(" — the Piper voice parity tests are skipped here") {}
};

}  // namespace

TEST_P(VitsParity, matches_pytorch_within_1e4_for_every_size_and_the_multi_speaker_voice) {
    const auto ids = reference_ids();
    for (const auto& v : voices()) {
        SCOPED_TRACE(v.name);
        const VitsTextToLatent prior(v.weights);
        std::mt19937_64 rng(1);
        const VitsLatent latent = prior.run(ids, v.speaker, {0.0f, v.length_scale, 0.0f}, rng);
        EXPECT_EQ(latent.durations, v.durations);
        auto decoder = load_vits_decoder(*v.weights, v.sample_rate, v.speaker, v.name, backend_);
        const auto audio = decoder->vocode(latent.z, latent.frames);
        ASSERT_EQ(audio.size(), v.audio.size());
        const double diff = max_abs_diff(audio, v.audio);
        std::printf("[ %-8s ] %-18s max |ours - PyTorch| = %.3g over %zu samples\n",
                    gpu::to_string(GetParam()), v.name.c_str(), diff, audio.size());
        EXPECT_LE(diff, 1e-4);
    }
}

TEST_P(VitsParity, decoder_chunked_equals_whole_for_chunks_of_1_to_64_frames) {
    const auto ids = reference_ids();
    auto all = voices();
    // On the CPU every chunk size from 1 to 64 for the multi-speaker voice;
    // 2, 13 and 64 for the others (the x_low, low and medium decoders have
    // one shape; on devices only high's other decoder shape is added). On a
    // device each size renders the whole sentence again (about 3 s on
    // lavapipe), so the multi-speaker voice gets the sizes that reach every
    // branch its stream layers take anywhere in 1..64 (a window held short,
    // full or past, a delay gathered or straight through, an upsampler's
    // dropped outputs: 1, 3, 4, 5, 10 and 11 reach them all), 32 (the
    // engine's steady chunk, Piper's largest) and 64 (past it, and a last
    // chunk of 33 frames). The CPU sweep proves those branches for every
    // size; the device's part is its kernels and its recorded replays on
    // them, whose widths (1 to 64 frames, and a short last chunk) these
    // sizes span. Emulated (the aarch64 suite under qemu, where the sweep
    // took 37 s) the CPU takes the device's sizes too: the branches are the
    // same host code the native suite sweeps; what is the target's own is
    // the CPU kernels under them.
    const bool cpu = GetParam() == gpu::BackendKind::Cpu;
    const bool every_size = cpu && !test::emulator();
    const std::vector<int> device_sizes = {1, 3, 4, 5, 10, 11, 32, 64};
    const std::vector<int> other_sizes = {2, 13, 64};
    for (const auto& v : all) {
        const bool multi = v.name == "test_medium_multi";
        if (!cpu && !multi && v.name != "test_high") continue;
        std::vector<int> sizes = multi ? device_sizes : other_sizes;
        if (multi && every_size) {
            sizes.clear();
            for (int c = 1; c <= 64; ++c) sizes.push_back(c);
        }
        SCOPED_TRACE(v.name);
        const VitsTextToLatent prior(v.weights);
        std::mt19937_64 rng(1);
        const VitsLatent latent = prior.run(ids, v.speaker, {0.0f, v.length_scale, 0.0f}, rng);
        auto decoder = load_vits_decoder(*v.weights, v.sample_rate, v.speaker, v.name, backend_);
        const auto whole = decoder->vocode(latent.z, latent.frames);
        double worst = 0;
        for (int chunk : sizes) {
            SCOPED_TRACE("chunk " + std::to_string(chunk));
            MelVocoderStream stream(decoder);
            std::vector<float> got;
            for (int f0 = 0; f0 < latent.frames; f0 += chunk) {
                const int n = std::min(chunk, latent.frames - f0);
                std::vector<float> part;
                copy_mel_frames(latent.z, latent.channels, latent.frames, f0, n, part);
                const auto out = stream.push(part, n);
                got.insert(got.end(), out.begin(), out.end());
            }
            const auto rest = stream.finish();
            got.insert(got.end(), rest.begin(), rest.end());
            ASSERT_EQ(got.size(), whole.size());
            const double diff = max_abs_diff(got, whole);
            worst = std::max(worst, diff);
            EXPECT_LE(diff, 1e-5);
        }
        std::printf("[ %-8s ] %-18s %zu chunk sizes, worst chunked difference %.2e\n",
                    gpu::to_string(GetParam()), v.name.c_str(), sizes.size(), worst);
    }
}

// The flow on the backend (float, mirrored couplings instead of flips,
// speaker folded into the biases) against the host's (double, as Piper).
TEST_P(VitsParity, flow_on_the_backend_matches_the_host_flow) {
    const auto ids = reference_ids();
    for (const auto& v : voices()) {
        SCOPED_TRACE(v.name);
        const VitsTextToLatent prior(v.weights);
        std::mt19937_64 rng(3);
        const VitsScales scales{0.667f, v.length_scale, 0.8f};  // noise on: a richer latent
        VitsLatent device = prior.sample_prior(ids, v.speaker, scales, rng);
        std::mt19937_64 rng2(3);
        const VitsLatent host = prior.run(ids, v.speaker, scales, rng2);
        ASSERT_EQ(device.z.size(), host.z.size());
        VitsFlowNetwork flow(*v.weights, v.speaker, backend_);
        flow.run(device.z, device.frames);
        const double diff = max_abs_diff(device.z, host.z);
        std::printf("[ %-8s ] %-18s flow max |backend - host| = %.3g over %zu values\n",
                    gpu::to_string(GetParam()), v.name.c_str(), diff, device.z.size());
        EXPECT_LE(diff, 1e-5);
    }
}

// The flow streamed (VitsFlowStream: each layer keeps the frames its kernel
// still needs) in pushes of 1 to 64 frames, asked for its output a few
// frames at a time, against the whole sentence's flow on the same backend.
TEST_P(VitsParity, streamed_flow_equals_the_whole_flow_for_pushes_of_1_to_64_frames) {
    const auto ids = reference_ids();
    for (const auto& v : voices()) {
        SCOPED_TRACE(v.name);
        const VitsTextToLatent prior(v.weights);
        std::mt19937_64 rng(5);
        const VitsLatent latent =
            prior.sample_prior(ids, v.speaker, {0.667f, v.length_scale, 0.8f}, rng);
        VitsFlowNetwork flow(*v.weights, v.speaker, backend_);
        std::vector<float> whole = latent.z;
        flow.run(whole, latent.frames);
        EXPECT_EQ(flow.context(), 32);  // 4 couplings x 4 layers x (5 - 1) / 2
        const std::vector<int> pushes = v.name == "test_medium_multi"
                                            ? std::vector<int>{1, 2, 3, 5, 7, 16, 31, 33, 64}
                                            : std::vector<int>{1, 13, 64};
        // Output asked for in steps of 3 frames: each call pushes what that
        // needs, at least `push` frames at a time.
        const auto streamed = [&](VitsFlowStream& stream) {
            std::vector<float> z(latent.z.size(), NAN);
            for (int until = 3; stream.made() < latent.frames; until += 3) {
                const int made = stream.run_until(latent.z, latent.frames, until, z);
                EXPECT_GE(made, std::min(until, latent.frames));
            }
            return max_abs_diff(z, whole);
        };
        double worst = 0;
        for (const int push : pushes) {
            VitsFlowStream stream(flow, push);
            const double diff = streamed(stream);
            worst = std::max(worst, diff);
            EXPECT_LE(diff, 1e-5) << "pushes of " << push;
            // A second sentence on the same stream, after reset().
            stream.reset();
            EXPECT_LE(streamed(stream), 1e-5) << "pushes of " << push << ", after reset()";
        }
        std::printf("[ %-8s ] %-18s %zu push sizes, worst streamed flow difference %.2e\n",
                    gpu::to_string(GetParam()), v.name.c_str(), pushes.size(), worst);
    }
}

// The whole voice as the engine runs it (prior on the host, flow and
// decoder on the backend) against PyTorch.
TEST_P(VitsParity, voice_render_matches_pytorch_within_1e4) {
    const auto ids = reference_ids();
    for (const auto& v : voices()) {
        SCOPED_TRACE(v.name);
        auto voice = VitsVoice::open(kData + v.name + ".onnx", v.sample_rate, backend_);
        const auto audio = voice->render(ids, v.speaker, {0.0f, v.length_scale, 0.0f}, 1);
        ASSERT_EQ(audio.size(), v.audio.size());
        const double diff = max_abs_diff(audio, v.audio);
        std::printf("[ %-8s ] %-18s voice max |ours - PyTorch| = %.3g\n",
                    gpu::to_string(GetParam()), v.name.c_str(), diff);
        EXPECT_LE(diff, 1e-4);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, VitsParity,
                         ::testing::Values(gpu::BackendKind::Cpu, gpu::BackendKind::OpenCl,
                                           gpu::BackendKind::Cuda, gpu::BackendKind::Vulkan),
                         [](const auto& info) { return std::string(gpu::to_string(info.param)); });

TEST(VitsTextToLatent, ids_speakers_and_scales_out_of_range_are_refused) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_medium_multi.onnx"));
    const VitsTextToLatent prior(w);
    std::mt19937_64 rng(1);
    const std::vector<std::int64_t> bad_id{1, 0, 256, 0, 2}, ok{1, 0, 20, 0, 2}, none;
    EXPECT_THROW(prior.run(bad_id, 0, {}, rng), etude::Error);
    EXPECT_THROW(prior.run(none, 0, {}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, 4, {}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, -1, {}, rng), etude::Error);
    EXPECT_NO_THROW(prior.run(ok, 3, {}, rng));
    EXPECT_THROW(prior.run(ok, 0, {0.667f, 0.0f, 0.8f}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, 0, {0.667f, -1.0f, 0.8f}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, 0, {NAN, 1.0f, 0.8f}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, 0, {0.667f, 1.0f, -0.1f}, rng), etude::Error);
    EXPECT_THROW(prior.run(ok, 0, {0.667f, INFINITY, 0.8f}, rng), etude::Error);
    // An absurd length_scale: refused, not a latent of gigabytes.
    try {
        prior.run(ok, 0, {0.0f, 1e7f, 0.0f}, rng);
        ADD_FAILURE() << "accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("frames"), std::string::npos) << e.what();
    }
}

// The prior is drawn frame by frame as the flow asks for it: any split of
// the frames into requests gives the same latent as drawing it whole, and
// a request that skips or repeats frames is refused.
TEST(VitsTextToLatent, the_prior_drawn_in_pieces_equals_the_prior_drawn_whole) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_x_low.onnx"));
    const VitsTextToLatent net(w);
    const auto ids = reference_ids();
    const VitsScales scales{0.667f, 1.0f, 0.8f};
    std::mt19937_64 a(11);
    VitsPrior whole_prior = net.prior(ids, 0, scales, a);
    const auto whole = whole_prior.sample_all();
    const int channels = whole_prior.channels(), frames = whole_prior.frames();
    ASSERT_GT(frames, 40);
    for (const int piece : {1, 3, 7, 32, frames}) {
        std::mt19937_64 b(11);
        VitsPrior prior = net.prior(ids, 0, scales, b);
        std::vector<float> drawn(whole.size(), NAN), part;
        for (int first = 0; first < frames; first += piece) {
            const int n = std::min(piece, frames - first);
            part.assign(std::size_t(channels) * n, NAN);
            prior.sample(first, n, part.data());
            for (int c = 0; c < channels; ++c)
                std::copy_n(part.begin() + std::ptrdiff_t(c) * n, n,
                            drawn.begin() + std::ptrdiff_t(c) * frames + first);
        }
        EXPECT_EQ(drawn, whole) << "pieces of " << piece;
    }
    std::mt19937_64 c(11);
    VitsPrior prior = net.prior(ids, 0, scales, c);
    std::vector<float> part(std::size_t(channels) * 4);
    EXPECT_THROW(prior.sample(4, 4, part.data()), std::logic_error);  // skips frames 0-3
    prior.sample(0, 4, part.data());
    EXPECT_THROW(prior.sample(0, 4, part.data()), std::logic_error);       // draws them again
    EXPECT_THROW(prior.sample(4, frames, part.data()), std::logic_error);  // past the end
}

// A sentence of about 300 ids in Piper's ^ _ (p _)* $ layout: the
// reference's phonemes, over and over.
std::vector<std::int64_t> long_ids() {
    const auto ids = reference_ids();
    std::vector<std::int64_t> out{ids.front()};
    while (out.size() < 300) out.insert(out.end(), ids.begin() + 1, ids.end() - 1);
    out.push_back(ids.back());
    return out;
}

// A staged prior (its first durations now, the rest on complete_durations)
// ends as the whole one: the same durations, frames and samples, and the
// caller's generator left in the same state; a staged prior drawn through
// the flow stream, which completes it when its pushes need it, gives the
// whole sentence's flow. Every test voice, so every duration predictor
// shape Piper has (and a speaker's conditioning).
TEST(VitsTextToLatent, a_staged_prior_completes_to_the_whole_prior) {
    const auto ids = long_ids();
    const auto backend = gpu::shared_cpu_backend();
    for (const auto& v : voices()) {
        SCOPED_TRACE(v.name);
        const VitsTextToLatent net(v.weights);
        ASSERT_GT(int(ids.size()), VitsTextToLatent::kStagedPhonemes + net.duration_reach());
        const VitsScales scales{0.667f, v.length_scale, 0.8f};
        std::mt19937_64 a(3), b(3);
        VitsPrior whole = net.prior(ids, v.speaker, scales, a);
        VitsPrior staged = net.prior(ids, v.speaker, scales, b, PriorDurations::Staged);
        EXPECT_TRUE(whole.complete());
        ASSERT_FALSE(staged.complete());
        EXPECT_EQ(a(), b());  // the next sentence's noise is the same
        ASSERT_EQ(staged.durations().size(), std::size_t(VitsTextToLatent::kStagedPhonemes));
        EXPECT_TRUE(std::equal(staged.durations().begin(), staged.durations().end(),
                               whole.durations().begin()));
        const int known = staged.frames();
        EXPECT_LT(known, whole.frames());
        // Frames drawn before the rest of the durations are made.
        std::vector<float> first(std::size_t(staged.channels()) * known);
        std::vector<float> first_whole(first.size());
        staged.sample(0, known, first.data());
        whole.sample(0, known, first_whole.data());
        EXPECT_EQ(first, first_whole);
        std::vector<float> more(std::size_t(staged.channels()));
        EXPECT_THROW(staged.sample(known, 1, more.data()), std::logic_error);
        staged.complete_durations();
        EXPECT_TRUE(staged.complete());
        EXPECT_EQ(staged.durations(), whole.durations());
        ASSERT_EQ(staged.frames(), whole.frames());
        const int rest = whole.frames() - known;
        std::vector<float> tail(std::size_t(staged.channels()) * rest), tail_whole(tail.size());
        staged.sample(known, rest, tail.data());
        whole.sample(known, rest, tail_whole.data());
        EXPECT_EQ(tail, tail_whole);

        // Through the flow stream, pushes of 32 frames, output asked for
        // 4 frames at a time.
        std::mt19937_64 c(3), d(3);
        VitsPrior for_flow = net.prior(ids, v.speaker, scales, c, PriorDurations::Staged);
        const VitsLatent latent = net.sample_prior(ids, v.speaker, scales, d);
        VitsFlowNetwork flow(*v.weights, v.speaker, backend);
        std::vector<float> expected = latent.z;
        flow.run(expected, latent.frames);
        VitsFlowStream stream(flow);
        std::vector<float> z(std::size_t(for_flow.channels()) * for_flow.frames(), NAN);
        for (int until = 4; stream.made() < for_flow.frames() || !for_flow.complete(); until += 4)
            stream.run_until(for_flow, until, z);
        ASSERT_EQ(for_flow.frames(), latent.frames);
        EXPECT_LE(max_abs_diff(z, expected), 1e-5);
    }
}

// A staged prior whose first durations already add up past the frame
// limit's share is refused at once, as a whole one is, before any audio.
TEST(VitsTextToLatent, a_staged_prior_with_an_absurd_length_scale_is_refused_at_once) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_x_low.onnx"));
    const VitsTextToLatent net(w);
    std::mt19937_64 rng(1);
    try {
        net.prior(long_ids(), 0, {0.667f, 2000.0f, 0.8f}, rng, PriorDurations::Staged);
        ADD_FAILURE() << "accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("add up to"), std::string::npos) << e.what();
    }
}

// The noise comes from the caller's generator: the same seed gives the
// same latent, another seed another one.
TEST(VitsTextToLatent, a_seed_reproduces_the_noise) {
    auto w = std::make_shared<VitsWeights>(read_vits_weights(kData + "test_x_low.onnx"));
    const VitsTextToLatent prior(w);
    const auto ids = reference_ids();
    std::mt19937_64 a(7), b(7), c(8);
    const auto la = prior.run(ids, 0, {}, a), lb = prior.run(ids, 0, {}, b),
               lc = prior.run(ids, 0, {}, c);
    EXPECT_EQ(la.z, lb.z);
    EXPECT_EQ(la.durations, lb.durations);
    EXPECT_NE(la.z, lc.z);
}

}  // namespace etude::engine

namespace etude::engine {

// Full-size voices (tools/piper_reference/make_voices.py --full-size DIR,
// about 260 MB, not stored): run when ETUDE_PIPER_FULL_DIR names that
// folder, on the CPU.
TEST(VitsParityFullSize, published_sizes_match_pytorch_within_1e4) {
    const char* dir = std::getenv("ETUDE_PIPER_FULL_DIR");
    if (!dir)
        GTEST_SKIP() << "set ETUDE_PIPER_FULL_DIR to the --full-size output of make_voices.py";
    const auto ids = reference_ids();
    for (const char* size : {"x_low", "low", "medium", "high"}) {
        const std::string base = std::string(dir) + "/full_" + size;
        SCOPED_TRACE(base);
        auto w = std::make_shared<VitsWeights>(read_vits_weights(base + ".onnx"));
        const int rate = read_json(base + ".onnx.json")["audio"]["sample_rate"].get<int>();
        const auto want = audio_io::read_npy(base + "_audio.npy").data;
        std::mt19937_64 rng(1);
        const auto t0 = std::chrono::steady_clock::now();
        const VitsLatent latent = VitsTextToLatent(w).run(ids, 0, {0.0f, 1.0f, 0.0f}, rng);
        const auto t1 = std::chrono::steady_clock::now();
        auto decoder = load_vits_decoder(*w, rate, 0, base, gpu::shared_cpu_backend());
        const auto t2 = std::chrono::steady_clock::now();
        const auto audio = decoder->vocode(latent.z, latent.frames);
        const auto t3 = std::chrono::steady_clock::now();
        ASSERT_EQ(audio.size(), want.size());
        const double diff = max_abs_diff(audio, want);
        const auto ms = [](auto a, auto b) {
            return std::chrono::duration<double, std::milli>(b - a).count();
        };
        std::printf(
            "[ cpu      ] full_%-8s max |ours - PyTorch| = %.3g over %zu samples; text to latent "
            "%.0f ms, decoder %.0f ms, for %.2f s of audio\n",
            size, diff, audio.size(), ms(t0, t1), ms(t2, t3), double(audio.size()) / rate);
        EXPECT_LE(diff, 1e-4);
        // The engine's own path: the flow on the backend.
        auto voice = VitsVoice::open(base + ".onnx", rate, gpu::shared_cpu_backend());
        voice->render(ids, 0, {0.0f, 1.0f, 0.0f}, 1);  // uploads the flow and decoder
        const auto t4 = std::chrono::steady_clock::now();
        std::mt19937_64 rng2(1);
        const VitsLatent l2 = voice->latent(ids, 0, {0.0f, 1.0f, 0.0f}, rng2);
        const auto t5 = std::chrono::steady_clock::now();
        const auto audio2 = voice->decoder(0)->vocode(l2.z, l2.frames);
        const double diff2 = max_abs_diff(audio2, want);
        std::printf(
            "[ cpu      ] full_%-8s voice (flow on the backend) max |ours - PyTorch| = %.3g; "
            "text to latent %.0f ms\n",
            size, diff2, ms(t4, t5));
        EXPECT_LE(diff2, 1e-4);
        // Time to first audio (printed, not asserted) for a sentence of
        // about 28 words: the reference phrase's ids six times, ~200 ids.
        std::vector<std::int64_t> long_ids{1, 0};
        for (int r = 0; r < 6; ++r) long_ids.insert(long_ids.end(), ids.begin() + 2, ids.end() - 1);
        long_ids.push_back(2);
        VitsSentenceStream stream(voice, 9);
        const auto t6 = std::chrono::steady_clock::now();
        // noise_w 0: random weights give wild durations with noise on.
        stream.start(long_ids, 0, {0.667f, 1.0f, 0.0f});
        std::size_t got = 0;
        while (got == 0 && !stream.done()) got = stream.next(8).size();
        const auto t7 = std::chrono::steady_clock::now();
        std::printf("[ cpu      ] full_%-8s %zu ids, %d frames: first audio after %.0f ms\n", size,
                    long_ids.size(), stream.frames(), ms(t6, t7));
    }
}

}  // namespace etude::engine

namespace etude::engine {

// The real en_US-joe-medium against ONNX Runtime running the same file: set
// ETUDE_PIPER_JOE_ONNX to the voice and ETUDE_PIPER_JOE_AUDIO to ONNX
// Runtime's output (float32 .npy) for reference.json's phoneme ids with
// scales [0, 1, 0] (tests/tools/joe_reference.py writes it).
// The reference sentence and the sentences of joe_sentences.json, each a
// model call of its own, their audio end to end as joe_reference.py writes
// ONNX Runtime's. A trained voice turns small differences before its
// durations into larger ones in its audio than the random test voices do
// (typically 2e-5 here), so several sentences guard the 1e-4 margin.
TEST(VitsParityRealVoice, joe_medium_matches_onnxruntime_within_1e4) {
    const char* onnx = std::getenv("ETUDE_PIPER_JOE_ONNX");
    const char* npy = std::getenv("ETUDE_PIPER_JOE_AUDIO");
    if (!onnx || !npy)
        GTEST_SKIP()
            << "set ETUDE_PIPER_JOE_ONNX and ETUDE_PIPER_JOE_AUDIO (tests/tools/joe_reference.py)";
    auto w = std::make_shared<VitsWeights>(read_vits_weights(onnx));
    const int rate = read_json(std::string(onnx) + ".json")["audio"]["sample_rate"].get<int>();
    const auto want = audio_io::read_npy(npy).data;
    std::vector<std::vector<std::int64_t>> id_lists{reference_ids()};
    const auto sentences = read_json(kData + "joe_sentences.json");
    for (const auto& sentence : sentences["sentences"])
        id_lists.push_back(sentence["phoneme_ids"].get<std::vector<std::int64_t>>());
    const VitsTextToLatent text_to_latent(w);
    auto decoder = load_vits_decoder(*w, rate, 0, onnx, gpu::shared_cpu_backend());
    std::size_t at = 0;
    double worst = 0;
    for (std::size_t s = 0; s < id_lists.size(); ++s) {
        std::mt19937_64 rng(1);
        const VitsLatent latent = text_to_latent.run(id_lists[s], 0, {0.0f, 1.0f, 0.0f}, rng);
        const auto audio = decoder->vocode(latent.z, latent.frames);
        ASSERT_LE(at + audio.size(), want.size())
            << "sentence " << s << " is longer than ONNX Runtime's";
        const std::vector<float> expected(want.begin() + std::ptrdiff_t(at),
                                          want.begin() + std::ptrdiff_t(at + audio.size()));
        const double diff = max_abs_diff(audio, expected);
        std::printf(
            "[ cpu      ] en_US-joe-medium sentence %zu (%zu ids): max |ours - onnxruntime| "
            "= %.3g over %zu samples\n",
            s, id_lists[s].size(), diff, audio.size());
        EXPECT_LE(diff, 1e-4) << "sentence " << s;
        worst = std::max(worst, diff);
        at += audio.size();
    }
    EXPECT_EQ(at, want.size()) << "the sentences' lengths differ from ONNX Runtime's";
    std::printf("[ cpu      ] en_US-joe-medium, %zu sentences: max |ours - onnxruntime| = %.3g\n",
                id_lists.size(), worst);
}

}  // namespace etude::engine
