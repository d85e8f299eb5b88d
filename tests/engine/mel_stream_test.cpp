// Mel streams: Stream::push_mel through the mel scheduler's tiers (GPU
// model, CPU model, phase reconstruction), against the offline render.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/npy_file.h"
#include "engine/engine.h"
#include "engine/etude.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/mel_scheduler.h"
#include "gpu/registry.h"
#include "support/devices_here.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kData = etude::test::test_data_dir() + "/neural/";

struct Mel {
    std::vector<float> values;  // [n_mels][frames]
    int n_mels = 0, frames = 0;
    // Frames [f0, f0 + n) as a chunk laid out [n_mels][n].
    std::vector<float> chunk(int f0, int n) const {
        std::vector<float> c;
        copy_mel_frames(values, n_mels, frames, f0, n, c);
        return c;
    }
};

Mel load_mel(const std::string& name) {
    auto a = audio_io::read_npy(kData + name + "_mel.npy");
    return {std::move(a.data), static_cast<int>(a.shape[0]), static_cast<int>(a.shape[1])};
}

using test::max_abs_diff;  // (a NaN counts as infinitely far)
using test::rms;

// An OpenCL device (PoCL in CI) stands in for a GPU that fails on purpose.
bool have_opencl() {
    return etude::test::has_device(gpu::BackendKind::OpenCl);
}

bool have_device(const std::string& kind) {
    for (const auto& d : gpu::DeviceRegistry::instance().devices())
        if (gpu::to_string(d.kind) == kind) return true;
    return false;
}

// HiFi-GAN V1's scheduler options with its GPU tier on `backend` and no
// phase reconstruction to fall back on: a chunk is the model's, on the
// device or the CPU.
MelSchedulerOptions hifigan_v1_on(const std::string& backend) {
    MelSchedulerOptions mo;
    mo.model_path = kData + "hifigan_v1.lef";
    mo.backend = backend;
    mo.allow_phase_fallback = false;
    return mo;
}

std::vector<float> offline(const std::string& name, const Mel& mel) {
    auto model = NeuralModel::load(kData + name + ".lef", gpu::shared_cpu_backend());
    return model->vocode(mel.values, mel.frames);
}

class MelStream : public ::testing::TestWithParam<const char*> {};

// Streamed through the engine in chunks of 5 frames, the audio equals the
// offline render (no resampling: the stream runs at the model's rate).
TEST_P(MelStream, streamed_output_equals_offline_render) {
    const std::string name = GetParam();
    const Mel mel = load_mel(name);
    const auto want = offline(name, mel);
    Engine engine;
    StreamOptions o;
    // The neural tiers only: exact output.
    o.voice = MelVoiceOptions{.model = kData + name + ".lef", .allow_phase_fallback = false};
    o.backend = "cpu";
    o.sample_rate = name == "vocos" ? 24000 : 22050;
    auto stream = engine.create_stream(o);
    EXPECT_EQ(stream->mel_bands(), static_cast<std::size_t>(mel.n_mels));
    for (int f0 = 0; f0 < mel.frames; f0 += 5) {
        const int n = std::min(5, mel.frames - f0);
        stream->push_mel(mel.chunk(f0, n), n, f0 + n == mel.frames);
    }
    std::vector<float> got(want.size() + 1000);
    got.resize(stream->read(got));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(max_abs_diff(got, want), 1e-5);
    const auto s = stream->stats();
    EXPECT_EQ(s.mel_frames, static_cast<std::uint64_t>(mel.frames));
    EXPECT_EQ(s.mel_chunks_phase, 0u);
    EXPECT_GT(s.mel_chunks_cpu, 0u);
    EXPECT_EQ(s.vocoder, "neural");
    EXPECT_GT(s.model_latency_ms, 0.0);
}

// Offline use: one thread pushes chunks while another read()s. read() waits
// for the utterance's `last` chunk (it does not stop when it catches up), and
// with no live consumer there is no deadline, so the model makes every chunk
// (the phase-reconstruction tier stays allowed here).
TEST(MelStreamOffline, read_waits_for_the_last_chunk_and_never_falls_to_phase) {
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v1", mel);
    Engine engine;
    StreamOptions o;
    o.voice = MelVoiceOptions{.model = kData + "hifigan_v1.lef"};
    o.backend = "cpu";
    o.sample_rate = 22050;
    auto stream = engine.create_stream(o);
    stream->push_mel(mel.chunk(0, 1), 1);  // the utterance is open before read() starts
    std::thread producer([&] {
        for (int f0 = 1; f0 < mel.frames; f0 += 1) {
            stream->push_mel(mel.chunk(f0, 1), 1, f0 + 1 == mel.frames);
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
        }
    });
    std::vector<float> got;
    std::vector<float> buf(1000);
    for (std::size_t n; (n = stream->read(buf)) > 0;)
        got.insert(got.end(), buf.begin(), buf.begin() + n);
    producer.join();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(max_abs_diff(got, want), 1e-5);
    EXPECT_EQ(stream->stats().mel_chunks_phase, 0u);
}

// Cancel in the middle of an utterance (its last chunk never comes): the
// next utterance starts clean and equals its own offline render.
TEST(MelStreamCancel, the_utterance_after_a_cancel_equals_its_offline_render) {
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v1", mel);
    Engine engine;
    StreamOptions o;
    o.voice = MelVoiceOptions{.model = kData + "hifigan_v1.lef", .allow_phase_fallback = false};
    o.backend = "cpu";
    o.sample_rate = 22050;
    auto stream = engine.create_stream(o);
    stream->push_mel(mel.chunk(0, 30), 30);  // no `last`: the utterance stays open
    std::vector<float> first(2048);
    ASSERT_EQ(stream->read(first), first.size());
    stream->cancel();
    for (int f0 = 0; f0 < mel.frames; f0 += 16) {
        const int n = std::min(16, mel.frames - f0);
        stream->push_mel(mel.chunk(f0, n), n, f0 + n == mel.frames);
    }
    std::vector<float> got(want.size() + 4096);
    got.resize(stream->read(got));
    // First the cancel's 5 ms fade-out of the old utterance, then the new one.
    const std::size_t fade = 110;  // 5 ms at 22050 Hz (StreamOptions::cancel_fade_ms)
    ASSERT_EQ(got.size(), fade + want.size());
    EXPECT_LE(max_abs_diff(std::span(got).subspan(fade), want), 1e-5);
    EXPECT_EQ(stream->stats().cancels, 1u);
}

// One chunk with no time left goes to phase reconstruction; plenty means the
// model. Switching to phase reconstruction and back keeps the timeline (same
// total length), and the model's output is exact up to the switch and again
// from the first sample it makes after it: HiFi-GAN because each frame's
// context is kept, Vocos because the frames skipped are rerun for the
// overlap-add (without that, dividing a lone window edge by its own squared
// window made a click of 3.7e4 here).
TEST_P(MelStream, tiers_switch_without_losing_the_timeline) {
    const std::string name = GetParam();
    const Mel mel = load_mel(name);
    const auto want = offline(name, mel);
    MelSchedulerOptions mo;
    mo.model_path = kData + name + ".lef";
    mo.backend = "cpu";
    const int r = NeuralModel::load(mo.model_path, gpu::shared_cpu_backend())->right_context();
    // 2-frame chunks skip fewer frames than a Vocos window spans (3 frames):
    // the frames before the skip are in the overlap-add already.
    for (const int chunk : {8, 2}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk));
        MelScheduler sched(mo);
        // The first chunk whose frames get their right context: the phase chunk
        // must make audio, or the test would not switch at all.
        const int phase_chunk = r / chunk + 1;
        ASSERT_LT((phase_chunk + 1) * chunk, mel.frames)
            << "the model must come back before the end";
        const std::int64_t plenty = 3'600'000'000'000;
        std::vector<float> got;
        std::vector<int> tiers;
        std::size_t before = 0, after = 0;  // the phase tier's samples: [before, after)
        for (int f0 = 0, i = 0; f0 < mel.frames; f0 += chunk, ++i) {
            const int n = std::min(chunk, mel.frames - f0);
            MelChunkReport report;
            if (i == phase_chunk) before = got.size();
            const auto audio = sched.process(mel.chunk(f0, n), n, f0 + n == mel.frames,
                                             i == phase_chunk ? 0 : plenty, report);
            tiers.push_back(report.tier);
            got.insert(got.end(), audio.begin(), audio.end());
            if (i == phase_chunk) after = got.size();
        }
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(tiers[0], 1);
        EXPECT_EQ(tiers[phase_chunk], 2) << "no time left: phase reconstruction";
        EXPECT_EQ(tiers.back(), 1);
        EXPECT_EQ(sched.stats().chunks[2], 1u);
        ASSERT_GT(after, before) << "the phase chunk made no audio";
        ASSERT_LT(after, got.size());
        EXPECT_LE(max_abs_diff(std::span(got).first(before), std::span(want).first(before)), 1e-5);
        EXPECT_LE(max_abs_diff(std::span(got).subspan(after), std::span(want).subspan(after)),
                  1e-5);
        // The reconstructed stretch is speech-like audio, not silence (judged
        // on the long one: two frames at the start of phase reconstruction
        // are still quiet), and no louder than the model's audio: no click at
        // either switch.
        const std::span<const float> mid = std::span(got).subspan(before, after - before);
        if (chunk == 8) {
            EXPECT_GT(rms(mid), 0.1 * rms(want));
        }
        EXPECT_GT(max_abs_diff(mid, std::span(want).subspan(before, after - before)), 0.01)
            << "the stretch is the phase tier's, not the model's";
        double peak_want = 0, peak = 0;
        for (float v : want) peak_want = std::max(peak_want, std::abs(double(v)));
        for (float v : got) peak = std::max(peak, std::abs(double(v)));
        EXPECT_LE(peak, 1.5 * peak_want) << "a click at a tier switch";
    }
}

INSTANTIATE_TEST_SUITE_P(Models, MelStream, ::testing::Values("hifigan_v1", "vocos"));

// A GPU tier that fails: the CPU model remakes each failed chunk from the same
// state, so the output is still exact, and every failure is counted. On
// every kind of device backend (OpenCL on PoCL, Vulkan on lavapipe here).
class MelStreamDeviceFaults : public ::testing::TestWithParam<std::string> {};

TEST_P(MelStreamDeviceFaults, failed_gpu_chunks_are_remade_on_the_cpu_exactly) {
    if (!have_device(GetParam())) GTEST_SKIP() << "no " << GetParam() << " device to fail";
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v1", mel);
    MelSchedulerOptions mo = hifigan_v1_on(GetParam());
    MelScheduler sched(mo);
    // The scheduler's device (the registry shares it): fail the first op of
    // two chunks in mid-stream, where the GPU's runner holds state and the
    // chunk makes audio.
    const auto device = open_model_backend(GetParam(), -1);
    std::vector<float> got;
    int fell_back = 0;
    for (int f0 = 0, i = 0; f0 < mel.frames; f0 += 4, ++i) {
        const int n = std::min(4, mel.frames - f0);
        if (i == 5 || i == 7) device->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, 0});
        MelChunkReport report;
        const auto audio =
            sched.process(mel.chunk(f0, n), n, f0 + n == mel.frames, 3'600'000'000'000, report);
        fell_back += report.fell_back;
        EXPECT_EQ(report.fell_back, i == 5 || i == 7) << "chunk " << i;
        if (report.fell_back) {
            EXPECT_GT(audio.size(), 0u) << "chunk " << i;
        }
        got.insert(got.end(), audio.begin(), audio.end());
    }
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(max_abs_diff(got, want), 1e-5);
    const auto s = sched.stats();
    EXPECT_EQ(s.gpu_failures, 2u);
    EXPECT_EQ(fell_back, 2);
    EXPECT_FALSE(s.gpu_disabled);
    EXPECT_GT(s.chunks[0], 0u);
}

INSTANTIATE_TEST_SUITE_P(Devices, MelStreamDeviceFaults, ::testing::Values("opencl", "vulkan"),
                         [](const auto& info) { return info.param; });

// ETUDE_FAULT=cpu-busy pins the GPU tier: with no time left (nothing fits,
// so the chooser would take the quicker tier, which on PoCL and lavapipe is
// the CPU) every chunk still runs on the device, but one the device fails is
// remade on the CPU, and the next goes back to the device.
TEST_P(MelStreamDeviceFaults, a_busy_cpu_leaves_every_chunk_the_device_may_take_to_it) {
    if (!have_device(GetParam())) GTEST_SKIP() << "no " << GetParam() << " device to pin";
    const Mel mel = load_mel("hifigan_v1");
    MelSchedulerOptions mo = hifigan_v1_on(GetParam());
    mo.cpu_busy = true;
    MelScheduler sched(mo);
    const auto device = open_model_backend(GetParam(), -1);  // the scheduler's (shared)
    for (int i = 0; i < 8; ++i) {
        if (i == 4) device->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, 0});
        MelChunkReport report;
        sched.process(mel.chunk(4 * i, 4), 4, false, 0, report);
        EXPECT_EQ(report.fell_back, i == 4) << "chunk " << i;
        EXPECT_EQ(report.tier, i == 4 ? 1 : 0) << "chunk " << i;
    }
    const auto s = sched.stats();
    EXPECT_EQ(s.chunks[0], 7u);
    EXPECT_EQ(s.chunks[1], 1u);
    EXPECT_EQ(s.gpu_failures, 1u);
}

// A stream read offline gives a GPU every chunk it may take (deadline.h's
// device_first()), with no time left for any: on a GPU machine (Vulkan on
// NVIDIA's driver in the GPU pack) that the calibration found quicker than
// the CPU, the device makes all eight. PoCL and lavapipe are no GPU: they
// run on the cores the CPU tier uses, so an offline reader's chunks there
// are still priced, and with no time left the quicker tier, the CPU, takes
// some (as on a GPU slower than the CPU for this small model).
TEST_P(MelStreamDeviceFaults, an_offline_reader_gives_a_gpu_every_chunk_and_others_are_priced) {
    if (!have_device(GetParam())) GTEST_SKIP() << "no " << GetParam() << " device";
    const Mel mel = load_mel("hifigan_v1");
    MelSchedulerOptions mo = hifigan_v1_on(GetParam());
    MelScheduler sched(mo);
    ASSERT_TRUE(sched.gpu_backend());
    sched.set_read_offline(true);
    for (int i = 0; i < 8; ++i) {
        MelChunkReport report;
        sched.process(mel.chunk(4 * i, 4), 4, false, 0, report, false);
    }
    if (sched.gpu_backend()->info().is_gpu && sched.gpu_calibrated_quicker()) {
        EXPECT_EQ(sched.stats().chunks[0], 8u) << "a GPU's offline chunk went elsewhere";
    } else {
        EXPECT_GT(sched.stats().chunks[1], 0u) << "every chunk went to the device unpriced";
    }
}

// A device error at any point while the stream is being made (loading the
// weights, preparing the layers' streaming state, calibrating) turns the GPU
// tier off with a note; the stream is made and its audio is exact.
TEST(MelStreamFaults, a_device_error_while_the_stream_is_made_only_turns_the_gpu_off) {
    if (!have_opencl()) GTEST_SKIP() << "no OpenCL device to fail";
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v1", mel);
    const auto device = open_model_backend("opencl", -1);
    MelSchedulerOptions mo = hifigan_v1_on("opencl");
    int gpu_off = 0;
    for (int after = 0; after <= 1200; after += 40) {
        SCOPED_TRACE("out of memory after " + std::to_string(after) + " operations");
        device->inject_fault({gpu::GpuFault::OutOfMemory, 1, 0, after});
        std::unique_ptr<MelScheduler> sched;
        ASSERT_NO_THROW(sched = std::make_unique<MelScheduler>(mo));
        gpu_off += sched->stats().gpu_device.empty() ||
                   sched->stats().gpu_note.find("failed") != std::string::npos;
        std::vector<float> got;
        for (int f0 = 0; f0 < mel.frames; f0 += 6) {
            const int n = std::min(6, mel.frames - f0);
            MelChunkReport report;
            const auto audio = sched->process(mel.chunk(f0, n), n, f0 + n == mel.frames,
                                              3'600'000'000'000, report);
            got.insert(got.end(), audio.begin(), audio.end());
        }
        ASSERT_EQ(got.size(), want.size());
        EXPECT_LE(max_abs_diff(got, want), 1e-5);
        device->inject_fault({});
        device->reset_health();
    }
    EXPECT_GT(gpu_off, 0) << "no fault hit the construction";
}

// Two models of one family on two tiers (V1 on the "GPU", V3 on the CPU):
// a chunk the GPU fails is made by V3 and is exactly V3's audio for those
// frames; every other chunk is exactly V1's.
TEST(MelStreamFaults, a_cheaper_cpu_model_covers_a_failed_gpu_chunk_exactly) {
    if (!have_opencl()) GTEST_SKIP() << "no OpenCL device to stand in for a GPU";
    const Mel mel = load_mel("hifigan_v1");
    const auto v1 = offline("hifigan_v1", mel);
    const auto v3 = offline("hifigan_v3", mel);
    MelSchedulerOptions mo = hifigan_v1_on("opencl");
    mo.cpu_model_path = kData + "hifigan_v3.lef";
    MelScheduler sched(mo);
    EXPECT_NE(sched.stats().model.find("hifigan_v3"), std::string::npos);
    const auto device = open_model_backend("opencl", -1);  // the scheduler's (shared)
    std::vector<float> got;
    std::vector<std::pair<std::size_t, std::size_t>> v3_spans;
    for (int f0 = 0, i = 0; f0 < mel.frames; f0 += 6, ++i) {
        const int n = std::min(6, mel.frames - f0);
        if (i == 4) device->inject_fault({gpu::GpuFault::KernelFailure, 1, 0, 0});
        MelChunkReport report;
        const auto audio =
            sched.process(mel.chunk(f0, n), n, f0 + n == mel.frames, 3'600'000'000'000, report);
        if (report.tier == 1) v3_spans.emplace_back(got.size(), audio.size());
        got.insert(got.end(), audio.begin(), audio.end());
    }
    ASSERT_EQ(got.size(), v1.size());
    ASSERT_EQ(v3_spans.size(), 1u) << "one chunk failed on the GPU";
    ASSERT_GT(v3_spans[0].second, 0u);
    std::vector<bool> from_v3(got.size(), false);
    for (auto [at, n] : v3_spans)
        for (std::size_t i = at; i < at + n; ++i) from_v3[i] = true;
    double d1 = 0, d3 = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double e = std::abs(static_cast<double>(got[i]) - (from_v3[i] ? v3[i] : v1[i]));
        (from_v3[i] ? d3 : d1) = std::max(from_v3[i] ? d3 : d1, e);
    }
    EXPECT_LE(d1, 1e-5) << "V1 chunks";
    EXPECT_LE(d3, 1e-5) << "the V3 chunk";
    EXPECT_GT(max_abs_diff(v1, v3), 0.01) << "the two models really differ";
    EXPECT_EQ(sched.stats().gpu_failures, 1u);
}

// Without a GPU tier only the CPU model runs; one that reads another mel
// than the main model must still be refused, not run silently.
TEST(MelStreamErrors, a_cpu_model_of_another_family_is_refused_even_without_a_gpu) {
    MelSchedulerOptions mo;
    mo.model_path = kData + "hifigan_v1.lef";
    mo.cpu_model_path = kData + "vocos.lef";
    mo.backend = "cpu";
    try {
        MelScheduler sched(mo);
        ADD_FAILURE() << "a Vocos CPU model was accepted under HiFi-GAN V1";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot stand in"), std::string::npos) << e.what();
    }
    mo.cpu_model_path = kData + "hifigan_v3.lef";  // same family and mel: fine
    MelScheduler ok(mo);
    EXPECT_NE(ok.stats().model.find("hifigan_v3"), std::string::npos);
}

TEST(MelStreamErrors, bad_input_gets_a_clear_error) {
    Engine engine;
    StreamOptions text;
    auto text_stream = engine.create_stream(text);
    std::vector<float> some(80, 0.0f);
    EXPECT_THROW(text_stream->push_mel(some, 1), Error);
    EXPECT_EQ(text_stream->mel_bands(), 0u);

    StreamOptions o;
    o.voice = MelVoiceOptions{.model = kData + "hifigan_v1.lef"};
    o.backend = "cpu";
    auto s = engine.create_stream(o);
    EXPECT_THROW(s->push_text("hello"), Error);
    EXPECT_THROW(s->push_mel(some, 2), Error);  // 80 values are not 80 x 2
    some[3] = NAN;
    EXPECT_THROW(s->push_mel(some, 1), Error);

    // Ending a mel stream's (absent) text is no error: generic callers end every stream.
    EXPECT_EQ(s->end_input(), 0u);
    EXPECT_THROW(s->set_voice("rms"), Error);  // it has no text voice to change
    StreamOptions missing = o;
    missing.voice = MelVoiceOptions{.model = kData + "no_such_model.lef"};
    EXPECT_THROW(engine.create_stream(missing), Error);
    StreamOptions bad_backend = o;
    bad_backend.backend = "quantum";
    EXPECT_THROW(engine.create_stream(bad_backend), Error);
}

TEST(MelStreamCApi, push_mel_through_the_c_api) {
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v1", mel);
    etude_engine* e = nullptr;
    ASSERT_EQ(etude_engine_create(&e), ETUDE_OK);
    etude_stream* s = nullptr;
    EXPECT_NE(etude_stream_create_mel(e, (kData + "missing.lef").c_str(), "cpu", 22050, &s),
              ETUDE_OK);
    EXPECT_NE(std::string(etude_last_error()).find("missing.lef"), std::string::npos);
    ASSERT_EQ(etude_stream_create_mel(e, (kData + "hifigan_v1.lef").c_str(), "cpu", 22050, &s),
              ETUDE_OK)
        << etude_last_error();
    const auto all = mel.chunk(0, mel.frames);
    EXPECT_EQ(etude_stream_push_mel(s, all.data(), 40, 2, 0), ETUDE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(etude_last_error()).find("mel bands"), std::string::npos);
    ASSERT_EQ(etude_stream_push_mel(s, all.data(), 80, static_cast<std::size_t>(mel.frames), 1),
              ETUDE_OK);
    std::vector<float> got(want.size() + 100);
    got.resize(etude_stream_read(s, got.data(), got.size()));
    EXPECT_EQ(got.size(), want.size());
    etude_stream_destroy(s);
    etude_engine_destroy(e);
}

// The tiers through the C API: on the CPU the stream runs the cheaper CPU
// model (V3 here, not V1), exactly, and the counters say which tier made
// the chunks.
TEST(MelStreamCApi, tiered_stream_through_the_c_api) {
    const Mel mel = load_mel("hifigan_v1");
    const auto want = offline("hifigan_v3", mel);
    ASSERT_GT(max_abs_diff(want, offline("hifigan_v1", mel)), 0.01) << "V1 and V3 must differ";
    etude_engine* e = nullptr;
    ASSERT_EQ(etude_engine_create(&e), ETUDE_OK);
    const std::string v1 = kData + "hifigan_v1.lef", v3 = kData + "hifigan_v3.lef",
                      vocos = kData + "vocos.lef";
    etude_mel_stream_options o{};
    etude_stream* s = nullptr;
    EXPECT_EQ(etude_stream_create_mel_ex(e, &o, &s), ETUDE_ERROR_INVALID_ARGUMENT)
        << "options not filled by the init function";
    EXPECT_NE(std::string(etude_last_error()).find("struct_size"), std::string::npos);
    etude_mel_stream_options_init(&o, sizeof o);
    EXPECT_EQ(o.struct_size, sizeof o);
    EXPECT_EQ(std::string(o.backend), "auto");
    EXPECT_EQ(o.device, -1);
    EXPECT_NE(o.allow_phase_fallback, 0);
    EXPECT_EQ(etude_stream_create_mel_ex(e, &o, &s), ETUDE_ERROR_INVALID_ARGUMENT)
        << "no model_path";
    EXPECT_NE(std::string(etude_last_error()).find("model_path"), std::string::npos);
    o.model_path = v1.c_str();
    o.cpu_model_path = vocos.c_str();
    o.backend = "cpu";
    EXPECT_EQ(etude_stream_create_mel_ex(e, &o, &s), ETUDE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(etude_last_error()).find("cannot stand in"), std::string::npos)
        << etude_last_error();
    EXPECT_EQ(s, nullptr);

    o.cpu_model_path = v3.c_str();
    o.allow_phase_fallback = 0;
    o.sample_rate = 22050;
    ASSERT_EQ(etude_stream_create_mel_ex(e, &o, &s), ETUDE_OK) << etude_last_error();
    for (int f0 = 0; f0 < mel.frames; f0 += 7) {
        const int n = std::min(7, mel.frames - f0);
        const auto chunk = mel.chunk(f0, n);
        ASSERT_EQ(etude_stream_push_mel(s, chunk.data(), 80, static_cast<std::size_t>(n),
                                        f0 + n == mel.frames),
                  ETUDE_OK)
            << etude_last_error();
    }
    std::vector<float> got(want.size() + 100);
    got.resize(etude_stream_read(s, got.data(), got.size()));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(max_abs_diff(got, want), 1e-5);
    etude_mel_stats m{};
    ASSERT_EQ(etude_stream_get_mel_stats(s, &m), ETUDE_OK);
    EXPECT_EQ(m.frames, static_cast<std::uint64_t>(mel.frames));
    EXPECT_GT(m.chunks_cpu, 0u);
    EXPECT_EQ(m.chunks_gpu, 0u);
    EXPECT_EQ(m.chunks_phase, 0u);
    EXPECT_GT(m.model_latency_ms, 0.0);
    etude_stream_destroy(s);

    etude_stream* text = nullptr;
    ASSERT_EQ(etude_stream_create(e, nullptr, 16000, &text), ETUDE_OK);
    EXPECT_EQ(etude_stream_get_mel_stats(text, &m), ETUDE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(etude_last_error()).find("not a mel stream"), std::string::npos);
    etude_stream_destroy(text);
    etude_engine_destroy(e);
}

}  // namespace
}  // namespace etude::engine
