// A Piper stream on a device analyses its sentences there too (the text
// encoder and the duration predictor: VitsAnalysisNetwork through
// PiperVoice::load_analysis), lavapipe for Vulkan and PoCL for OpenCL (each
// skipped where absent): the same frame counts and audio as the same
// stream on the CPU within the Piper device bound; a device error in a
// sentence's analysis leaves that sentence to the host with the same audio
// and, pulled live, no underrun; a duration on a tie goes to the host.
// Streams analysed at the same time meet in one batch on the device: each
// stream's audio is still its CPU render, a cancel inside the batch leaves
// the others whole, and a device error in it gives each stream the host's
// analysis, pulled live with no underrun.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_analysis_network.h"
#include "engine/voices/piper_voice.h"
#include "gpu/registry.h"
#include "support/emulation.h"
#include "support/model_parity.h"
#include "support/piper_on_device.h"
#include "support/piper_test_ids.h"
#include "support/stream_output.h"
#include "support/test_data.h"

using namespace etude::engine;
using etude::test::max_abs_diff;
using etude::test::read_all;

namespace {

const std::string kVoice = etude::test::test_data_dir() + "/piper/test_medium.onnx";

// The bound every backend's Piper audio holds against PyTorch's float64
// render (tests/engine/models/vits_parity_test.cpp), as the device flow's
// tests hold a device stream to the CPU's.
constexpr double kDeviceBound = 1e-4;

std::vector<std::vector<std::int64_t>> sentences() {
    auto two = etude::test::piper_test_sentences();
    two.push_back(etude::test::piper_ids_of_length(120));
    return two;
}

StreamOptions options(const std::string& backend, std::uint64_t seed, const std::string& faults,
                      std::optional<float> length_scale = std::nullopt) {
    StreamOptions o = etude::test::piper_on_device(kVoice, backend, seed, "", faults);
    std::get<PiperVoiceOptions>(o.voice).length_scale = length_scale;
    return o;
}

using Spoken = etude::test::SpokenIds;
using etude::test::speak;

void expect_same_audio(const Spoken& got, const Spoken& want, const std::string& what) {
    // Equal lengths: the same frame counts (each sentence's durations sum).
    ASSERT_EQ(got.audio.size(), want.audio.size()) << what;
    const double diff = max_abs_diff(got.audio, want.audio);
    std::printf("[ %s ] %zu samples: max |device - cpu| = %.3g\n", what.c_str(), got.audio.size(),
                diff);
    EXPECT_LE(diff, kDeviceBound) << what;
}

class PiperDeviceAnalysis : public etude::test::PiperOnDevice {
  protected:
    void SetUp() override {
        PiperOnDevice::SetUp();
        if (IsSkipped()) return;
        device_->reset_health();
        // The device's networks uploaded before any fault is armed, and
        // kept (the voice is shared while a holder lives): a fault then
        // lands in a sentence's work, not in a stream's uploads.
        voice_ = PiperVoice::open(kVoice);
        voice_->load_flow(0, device_);
        voice_->load_analysis(device_);
    }
    std::shared_ptr<const PiperVoice> voice_;
    Engine engine_;
};

TEST_P(PiperDeviceAnalysis, sentences_are_analysed_on_the_device_with_the_cpus_frames_and_audio) {
    const auto text = sentences();
    const Spoken cpu = speak(engine_, options("cpu", 7, ""), text);
    EXPECT_EQ(cpu.stats.analyses_cpu, text.size());
    EXPECT_EQ(cpu.stats.analyses_gpu, 0u);
    const Spoken dev = speak(engine_, options(name_, 7, ""), text);
    // A sentence whose durations happen to lie near a tie goes to the host
    // (counted); the others are the device's.
    EXPECT_EQ(dev.stats.analyses_gpu + dev.stats.analyses_near_tie, text.size());
    EXPECT_EQ(dev.stats.analyses_cpu, dev.stats.analyses_near_tie);
    EXPECT_GE(dev.stats.analyses_gpu, 2u);
    std::printf("[ %-8s ] %llu sentences analysed on the device, %llu near a tie\n", name_.c_str(),
                (unsigned long long)dev.stats.analyses_gpu,
                (unsigned long long)dev.stats.analyses_near_tie);
    EXPECT_EQ(dev.stats.gpu_failures, 0u) << dev.stats.gpu_last_error;
    EXPECT_EQ(dev.stats.flow_pushes_cpu, 0u);
    expect_same_audio(dev, cpu, name_);
    // One analysis per voice and device, shared by the streams there.
    const auto voice = PiperVoice::open(kVoice);
    EXPECT_EQ(voice->load_analysis(device_).get(), voice->load_analysis(device_).get());
    EXPECT_EQ(&voice->load_analysis(device_)->backend(), device_.get());
}

// Arms the device to fail `fault` operations from its next one on: the
// same GpuFault ETUDE_FAULT's kernel and oom items arm (fault_plan.h), but
// armed after the stream is created, since the stream's own device buffers
// (its flow's state) are allocated at creation, after the calibration where
// ETUDE_FAULT arms it. The first sentence's analysis is then the device's
// next work: a fault after fewer operations than one analysis takes (over
// a hundred for the test voice: VitsAnalysis's sweep) lands in it.
void arm(etude::gpu::Backend& device, const char* kind, int after) {
    const auto f = etude::gpu::parse_gpu_fault(std::string(kind) + ":1:0:" + std::to_string(after));
    ASSERT_TRUE(f);
    device.inject_fault(*f);
}

Spoken speak_with_fault(Engine& engine, etude::gpu::Backend& device, const StreamOptions& o,
                        const std::vector<std::vector<std::int64_t>>& text, const char* kind,
                        int after) {
    auto stream = engine.create_stream(o);
    arm(device, kind, after);
    for (const auto& ids : text) stream->push_phoneme_ids(ids);
    stream->end_input();
    Spoken s;
    s.audio = read_all(*stream);
    s.stats = stream->stats();
    device.inject_fault({});
    return s;
}

// One failing operation (a failed launch, or out of memory) in the first
// sentence's analysis, early (its encoder) or later: the host makes the
// sentence, the audio is the CPU's, the error is one line in the breaker
// (gpu_last_error) and the next sentences are the device's again.
TEST_P(PiperDeviceAnalysis, a_device_error_in_an_analysis_is_made_on_the_host_with_the_same_audio) {
    // Two short sentences: lavapipe takes about ten seconds a run of them.
    const auto text = etude::test::piper_test_sentences();
    const Spoken cpu = speak(engine_, options("cpu", 11, ""), text);
    for (const auto& [kind, after] :
         {std::pair{"kernel", 0}, std::pair{"oom", 0}, std::pair{"kernel", 40}}) {
        const std::string what = name_ + " " + kind + " after " + std::to_string(after);
        SCOPED_TRACE(what);
        const Spoken dev =
            speak_with_fault(engine_, *device_, options(name_, 11, ""), text, kind, after);
        std::printf(
            "[ %-8s ] %s: %llu analyses on the device, %llu on the host (%llu near a tie); %s\n",
            name_.c_str(), what.c_str(), (unsigned long long)dev.stats.analyses_gpu,
            (unsigned long long)dev.stats.analyses_cpu,
            (unsigned long long)dev.stats.analyses_near_tie, dev.stats.gpu_last_error.c_str());
        EXPECT_EQ(dev.stats.gpu_failures, 1u);
        EXPECT_FALSE(dev.stats.gpu_disabled);
        EXPECT_EQ(dev.stats.underruns, 0u);
        EXPECT_NE(dev.stats.gpu_last_error.find("VITS text analysis"), std::string::npos);
        EXPECT_EQ(dev.stats.analyses_cpu, 1u + dev.stats.analyses_near_tie);
        EXPECT_EQ(dev.stats.analyses_gpu + dev.stats.analyses_cpu, text.size());
        EXPECT_EQ(dev.stats.flow_pushes_cpu, 0u) << "the flow stays on the device";
        expect_same_audio(dev, cpu, what);
    }
}

// The same, pulled at the audio clock: the host's analysis of the failed
// sentence costs no underrun. PoCL makes the test voice many times faster
// than real time; lavapipe's is about real time on two loaded cores, so it
// is not asked (as the flow's drill).
TEST_P(PiperDeviceAnalysis, pulled_live_a_device_error_in_an_analysis_costs_no_underrun) {
    ETUDE_SKIP_WHEN_EMULATED("the stream is pulled at the audio clock");
    // (A Vulkan GPU, NVIDIA's in the GPU pack, has the margin.)
    if (GetParam() == etude::gpu::BackendKind::Vulkan && !device_->info().is_gpu)
        GTEST_SKIP() << device_->info().name
                     << ", no GPU, makes this voice at about real time here: no margin for a drill";
    const auto text = etude::test::piper_test_sentences();
    const Spoken cpu = speak(engine_, options("cpu", 13, ""), text);
    auto stream = engine_.create_stream(options(name_, 13, ""));
    arm(*device_, "kernel", 0);
    for (const auto& ids : text) stream->push_phoneme_ids(ids);
    stream->end_input();
    const auto got = etude::test::pull_at_audio_clock(*stream, 22050);
    device_->inject_fault({});
    const auto stats = stream->stats();
    EXPECT_EQ(stats.gpu_failures, 1u);
    EXPECT_NE(stats.gpu_last_error.find("VITS text analysis"), std::string::npos)
        << stats.gpu_last_error;
    EXPECT_GE(stats.analyses_cpu, 1u);
    EXPECT_EQ(stats.underruns, 0u) << "the producer fell behind a real-time consumer";
    ASSERT_EQ(got.size(), cpu.audio.size());
    EXPECT_LE(max_abs_diff(got, cpu.audio), kDeviceBound);
}

// A length scale that puts one phoneme's frames on a whole number (from
// the log durations of the stream's first sentence with its seed's noise,
// the predictor's on the CPU backend): the device's analysis of it hands
// the sentence to the host, whose frames and audio the stream gives.
TEST_P(PiperDeviceAnalysis, a_duration_on_a_tie_goes_to_the_host) {
    const auto ids = etude::test::piper_reference_ids();
    const auto voice = PiperVoice::open(kVoice);
    const VitsTextToLatent& host = voice->network().text_to_latent();
    const VitsDurationNetwork predictor(voice->network().weights(),
                                        etude::gpu::shared_cpu_backend());
    const VitsScales defaults = voice->scales(std::nullopt, 1.0f, std::nullopt);
    std::vector<double> logw;
    const VitsLogDurations capture = [&](const VitsEncoding& e, std::span<const double> z) {
        logw = predictor.log_durations(e, z, 0);
        return std::vector<double>{};
    };
    std::mt19937_64 noise(17);
    host.prior(host.encode(ids), 0, defaults, noise, capture);
    const double frames = std::exp(logw.at(10));
    const float tie = static_cast<float>(std::ceil(frames + 1.0) / frames);
    SCOPED_TRACE(tie);
    const std::vector<std::vector<std::int64_t>> text{ids};
    const Spoken cpu = speak(engine_, options("cpu", 17, "", tie), text);
    const Spoken dev = speak(engine_, options(name_, 17, "", tie), text);
    EXPECT_EQ(dev.stats.analyses_near_tie, 1u);
    EXPECT_EQ(dev.stats.analyses_cpu, 1u);
    EXPECT_EQ(dev.stats.analyses_gpu, 0u);
    EXPECT_EQ(dev.stats.gpu_failures, 0u) << dev.stats.gpu_last_error;
    expect_same_audio(dev, cpu, name_ + " on a tie");
}

// Streams whose sentences are analysed at the same time on the same device
// go there in one batch (VitsAnalysisNetwork::joiner(); on by default on a
// GPU only, so switched on here): kStreams streams (as many as the engine's
// two front-end workers analyse at once), stream i speaking sentence i with
// seed 41 + i, their analyses held in the paused joiner until all of them
// wait there; then `inside` runs, and the batch. Read live (read_some(): an
// offline reader's analysis joins the offline readers' batches), or pulled
// at the audio clock.
class PiperDeviceAnalysisBatch {
  public:
    static constexpr int kStreams = 2;
    explicit PiperDeviceAnalysisBatch(const std::shared_ptr<const PiperVoice>& voice,
                                      const std::shared_ptr<etude::gpu::Backend>& device)
        : analysis_(voice->load_analysis(device)), device_(device) {
        analysis_->set_join_streams(true);
        Engine::Options o;
        o.preload_voices = {};
        o.work_turns = kStreams + 1;  // a front-end worker per stream (one turn less)
        engine_ = std::make_unique<Engine>(o);
    }
    ~PiperDeviceAnalysisBatch() {
        streams_.clear();
        analysis_->set_join_streams(device_->info().is_gpu);
    }
    std::vector<std::vector<float>> speak_together(const std::string& backend,
                                                   const std::function<void()>& inside,
                                                   bool pulled_live = false) {
        const auto text = etude::test::piper_test_sentences();
        auto& joiner = *analysis_->joiner();
        joiner.pause();
        for (int i = 0; i < kStreams; ++i) {
            streams_.push_back(engine_->create_stream(options(backend, 41 + i, "")));
            streams_.back()->push_phoneme_ids(text[std::size_t(i)]);
            streams_.back()->end_input();
        }
        std::vector<std::vector<float>> got(kStreams);
        std::vector<std::thread> readers;
        for (int i = 0; i < kStreams; ++i)
            readers.emplace_back([&, i] {
                Stream& s = *streams_[std::size_t(i)];
                if (pulled_live) {
                    got[std::size_t(i)] = etude::test::pull_at_audio_clock(s, 22050);
                    return;
                }
                got[std::size_t(i)] = etude::test::read_some_to_the_end(s);
            });
        etude::test::wait_until([&] { return joiner.waiting() == kStreams; });
        EXPECT_EQ(joiner.waiting(), std::size_t(kStreams)) << "the analyses did not meet";
        inside();
        joiner.resume();
        for (auto& t : readers) t.join();
        EXPECT_GE(joiner.stats().largest, std::uint64_t(kStreams)) << "the analyses met";
        return got;
    }
    // Stream i's CPU render.
    Spoken cpu_render(int i) {
        return speak(*engine_, options("cpu", 41 + std::uint64_t(i), ""),
                     {etude::test::piper_test_sentences()[std::size_t(i)]});
    }
    Stream& stream(int i) { return *streams_[std::size_t(i)]; }

  private:
    std::shared_ptr<const VitsAnalysisNetwork> analysis_;
    std::shared_ptr<etude::gpu::Backend> device_;
    std::unique_ptr<Engine> engine_;
    std::vector<std::unique_ptr<Stream>> streams_;
};

void expect_its_cpu_audio(PiperDeviceAnalysisBatch& batch, int i, const std::vector<float>& got,
                          const std::string& what) {
    const Spoken cpu = batch.cpu_render(i);
    Spoken dev{got, batch.stream(i).stats()};
    expect_same_audio(dev, cpu, what + " stream " + std::to_string(i));
}

TEST_P(PiperDeviceAnalysis, streams_analyses_meet_in_one_batch_with_the_cpus_audio) {
    PiperDeviceAnalysisBatch batch(voice_, device_);
    const auto got = batch.speak_together(name_, [] {});
    for (int i = 0; i < batch.kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        const StreamStats st = batch.stream(i).stats();
        EXPECT_EQ(st.analyses_gpu, 1u);
        EXPECT_EQ(st.analyses_batched, 1u) << "the stream's sentence was analysed in the batch";
        EXPECT_EQ(st.analyses_cpu, 0u);
        EXPECT_EQ(st.gpu_failures, 0u) << st.gpu_last_error;
        expect_its_cpu_audio(batch, i, got[std::size_t(i)], name_);
    }
}

// Stream 0 is cancelled while its analysis waits in the batch: the other's
// sentence is analysed in the batch and its audio is its CPU render.
TEST_P(PiperDeviceAnalysis, a_stream_cancelled_inside_a_batch_leaves_the_others_whole) {
    PiperDeviceAnalysisBatch batch(voice_, device_);
    const auto got = batch.speak_together(name_, [&] { batch.stream(0).cancel(); });
    EXPECT_FALSE(batch.stream(0).busy());
    for (int i = 1; i < batch.kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        const StreamStats st = batch.stream(i).stats();
        EXPECT_EQ(st.analyses_batched, 1u);
        EXPECT_EQ(st.gpu_failures, 0u) << st.gpu_last_error;
        expect_its_cpu_audio(batch, i, got[std::size_t(i)], name_ + " beside a cancel,");
    }
}

// A failed launch inside the batch (the device's next operations after the
// analyses met): every stream of it has its sentence made on the host, the
// batch named in its last error, and, pulled at the audio clock, no
// underrun; each one's audio is its CPU render. PoCL only, as the drill of
// one stream above.
TEST_P(PiperDeviceAnalysis,
       pulled_live_a_device_error_in_a_batch_gives_each_stream_the_hosts_audio) {
    ETUDE_SKIP_WHEN_EMULATED("the streams are pulled at the audio clock");
    // (A Vulkan GPU, NVIDIA's in the GPU pack, has the margin.)
    if (GetParam() == etude::gpu::BackendKind::Vulkan && !device_->info().is_gpu)
        GTEST_SKIP() << device_->info().name
                     << ", no GPU, makes this voice at about real time here: no margin for a drill";
    PiperDeviceAnalysisBatch batch(voice_, device_);
    const auto got = batch.speak_together(
        name_, [&] { arm(*device_, "kernel", 30); }, /*pulled_live=*/true);
    device_->inject_fault({});
    for (int i = 0; i < batch.kStreams; ++i) {
        SCOPED_TRACE("stream " + std::to_string(i));
        const StreamStats st = batch.stream(i).stats();
        EXPECT_EQ(st.gpu_failures, 1u);
        EXPECT_NE(st.gpu_last_error.find("VITS text analysis: a batch of 2 sentences failed"),
                  std::string::npos)
            << st.gpu_last_error;
        EXPECT_EQ(st.analyses_cpu, 1u);
        EXPECT_EQ(st.analyses_gpu, 0u);
        EXPECT_EQ(st.underruns, 0u) << "the producer fell behind a real-time consumer";
        expect_its_cpu_audio(batch, i, got[std::size_t(i)], name_ + " after a fault in its batch,");
    }
}

INSTANTIATE_TEST_SUITE_P(Devices, PiperDeviceAnalysis,
                         ::testing::Values(etude::gpu::BackendKind::Vulkan,
                                           etude::gpu::BackendKind::OpenCl),
                         [](const auto& info) { return etude::gpu::to_string(info.param); });

}  // namespace
