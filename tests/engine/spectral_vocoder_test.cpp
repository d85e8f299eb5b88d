// The spectral vocoder: same length as the MLSA vocoder, close to it in
// spectrum (log-spectral distance reported), the same on every backend within
// a stated tolerance, chunk-invariant, and covered by the CPU when the GPU
// fails, runs out of memory or is late.
#include "engine/models/spectral_vocoder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <complex>
#include <thread>

#include "dsp/fft.h"
#include "dsp/mel_cepstrum.h"
#include "engine/engine.h"
#include "engine/scheduling/block_processor.h"
#include "engine/voices/flite_voice.h"
#include "engine/voices/utterance_renderer.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/registry.h"

using namespace etude;
using engine::AcousticFrames;
using engine::FliteVoice;

namespace {

constexpr const char* kText = "A frame parallel vocoder should sound like the filter it replaces.";

std::vector<float> spectral_render(std::shared_ptr<gpu::Backend> backend, const AcousticFrames& f,
                                   const dsp::MlsaConfig& cfg, std::size_t chunk) {
    const auto sc = engine::spectral_config(cfg);
    gpu::SpectralVocoder v(std::move(backend), sc, 64);
    gpu::SpectralStreamState st(sc);
    std::vector<float> out;
    for (std::size_t first = 0; first < f.frames; first += chunk) {
        const std::size_t n = std::min(chunk, f.frames - first);
        gpu::SpectralRequest r{&st,
                               std::span(f.f0).subspan(first, n),
                               std::span(f.mcep).subspan(first * f.mcep_order, n * f.mcep_order),
                               std::span(f.strengths).subspan(first * f.bands, n * f.bands),
                               first + n == f.frames,
                               &out};
        v.render(std::span(&r, 1));
    }
    return out;
}

std::vector<float> mlsa_render(const FliteVoice& voice, const AcousticFrames& f) {
    engine::UtteranceRenderer r(voice, voice.sample_rate());
    std::vector<float> out;
    r.render(f, [&](std::span<const float> c, bool) {
        out.insert(out.end(), c.begin(), c.end());
        return true;
    });
    return out;
}

// Log-spectral distance in dB over frames where both signals have energy,
// on power spectra smoothed over 9 bins (~280 Hz): the two vocoders draw
// independent noise, and raw periodograms of two noises differ by several dB
// however alike their envelopes are.
double log_spectral_distance(const std::vector<float>& a, const std::vector<float>& b) {
    const std::size_t n = 512, hop = 256;
    dsp::RealFft fft(n);
    std::vector<float> win(n), fa(n), fb(n);
    for (std::size_t i = 0; i < n; ++i) win[i] = 0.5f - 0.5f * std::cos(2 * M_PI * i / n);
    std::vector<std::complex<float>> sa(n / 2 + 1), sb(n / 2 + 1);
    double total = 0;
    int frames = 0;
    for (std::size_t start = 0; start + n <= std::min(a.size(), b.size()); start += hop) {
        double ea = 0, eb = 0;
        for (std::size_t i = 0; i < n; ++i) {
            fa[i] = a[start + i] * win[i];
            fb[i] = b[start + i] * win[i];
            ea += fa[i] * fa[i];
            eb += fb[i] * fb[i];
        }
        if (ea < 1e-4 || eb < 1e-4) continue;  // silence: nothing to compare
        fft.forward(fa, sa);
        fft.forward(fb, sb);
        double sum = 0;
        int bins = 0;
        for (std::size_t k = 5; k + 4 < n / 2; ++k) {
            double pa = 1e-10, pb = 1e-10;
            for (std::size_t j = k - 4; j <= k + 4; ++j) {
                pa += std::norm(sa[j]);
                pb += std::norm(sb[j]);
            }
            const double d = 10 * std::log10(pa / pb);
            sum += d * d;
            ++bins;
        }
        total += std::sqrt(sum / bins);
        ++frames;
    }
    return frames ? total / frames : 1e9;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double peak = 1e-12, worst = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        peak = std::max(peak, static_cast<double>(std::abs(a[i])));
        worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    }
    return worst / peak;
}

// The relative energy of the difference between two renderings.
double rel_rms_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double e = 0, d = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        e += double(a[i]) * a[i];
        d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    }
    return std::sqrt(d / std::max(e, 1e-30));
}

// The largest change of the minimum-phase filter's phase per unit change of
// its log-magnitude, in the max-norm: the row sums of |M| where
// phase = M log|H| (irfft, fold, rfft of the vocoder's filter), in double.
double phase_gain(std::size_t n) {
    const std::size_t bins = n / 2 + 1;
    std::vector<double> c(n), s(n);
    for (std::size_t i = 0; i < n; ++i) {
        c[i] = std::cos(2 * M_PI * i / n);
        s[i] = std::sin(2 * M_PI * i / n);
    }
    double worst = 0;
    for (std::size_t k = 0; k < bins; ++k) {
        double row = 0;
        for (std::size_t b = 0; b < bins; ++b) {
            // Cepstrum of a unit log-magnitude at bin b, folded (x2 for
            // 0 < q < n/2), then the imaginary part of its DFT at bin k.
            const double w = (b == 0 || b == n / 2) ? 1.0 : 2.0;
            double m = 0;
            for (std::size_t q = 1; q < n / 2; ++q) m -= 2 * w / n * c[b * q % n] * s[k * q % n];
            row += std::abs(m);
        }
        worst = std::max(worst, row);
    }
    return worst;
}

std::shared_ptr<gpu::Backend> device_or_skip(const std::string& kind, std::string& why) {
    try {
        return gpu::DeviceRegistry::instance().open({kind, -1});
    } catch (const std::exception& e) {
        why = e.what();
        return nullptr;
    }
}

}  // namespace

TEST(SpectralVocoder, same_length_as_mlsa_and_close_in_spectrum) {
    const auto& voice = FliteVoice::load("slt");
    const AcousticFrames f = voice.analyse(kText);
    const auto mlsa = mlsa_render(voice, f);
    const auto spectral =
        spectral_render(gpu::DeviceRegistry::instance().cpu(), f, voice.vocoder_config(), f.frames);
    ASSERT_EQ(spectral.size(), mlsa.size());
    const double lsd = log_spectral_distance(mlsa, spectral);
    std::printf("[spectral] log-spectral distance to the MLSA vocoder: %.2f dB over %.2f s\n", lsd,
                mlsa.size() / 16000.0);
    EXPECT_LT(lsd, 6.0);
    double e = 0;
    for (float v : spectral) e += v * v;
    EXPECT_GT(std::sqrt(e / spectral.size()), 0.02);  // real speech level
}

// Chunking changes no sum on the host (overlap-add runs in frame order) and
// no FFT (the CPU backend plans per length and runs each segment alone), but
// the envelope is one SGEMM over a batch's segments, and OpenBLAS sums an
// element's products in an order that depends on the batch's size and the
// segment's row in it (with one SGEMM per segment chunked output is
// bit-identical; with every batch padded to 256 rows it still differs). So
// the bound is the one float rounding allows, to first order:
//  - a log-envelope value is a sum of K = order products; two summation
//    orders differ by at most 2 gamma_K A, gamma_K = K u / (1 - K u), where
//    A = sum_m |c_m basis_km| over the postfiltered cepstrum;
//  - the two cepstral FFTs after it round inputs of the same size
//    differently: 2 * 2 log2(N) u A more;
//  - a log-magnitude change d changes the filter's phase by at most
//    phase_gain(N) d, so |H| and arg H change by the fraction
//    e_H = d (1 + phase_gain);
//  - exp, cos/sin, the products and the last irfft round differently again:
//    2 (log2(N) + 6) u of the segment;
//  - Parseval: a spectrum changed by the fraction e in every bin changes
//    the segment's energy by at most e; an output sample sums at most
//    ceil(N / hop) segments, which add without cancelling (neighbours
//    filter overlapping excitation alike), so the output's relative RMS
//    difference is at most sqrt(ceil(N / hop)) times the segment's.
// Any chunking error (a lost hop, a state not carried) is of order one.
TEST(SpectralVocoder, chunked_rendering_equals_whole_rendering_within_float_rounding) {
    const auto& voice = FliteVoice::load("slt");
    const AcousticFrames f = voice.analyse(kText);
    const auto sc = engine::spectral_config(voice.vocoder_config());
    const std::size_t n = static_cast<std::size_t>(sc.n_fft),
                      order = static_cast<std::size_t>(sc.order);
    dsp::MelCepstrumEnvelope env(order, sc.alpha, n);
    double basis_max = 0;
    for (float v : env.basis()) basis_max = std::max(basis_max, double(std::abs(v)));
    // A bounds every segment's absolute sum: the postfilter scales c_2.. by
    // (1 + beta) and moves c_0 by at most beta sum_{m>=2} |c_m| basis_max.
    double a = 0;
    for (std::size_t t = 0; t < f.frames; ++t) {
        const float* c = &f.mcep[t * f.mcep_order];
        double tail = 0;
        for (std::size_t m = 2; m < order; ++m) tail += std::abs(c[m]);
        a = std::max(a, basis_max * (std::abs(c[0]) + std::abs(c[1]) + (1 + 2 * sc.beta) * tail));
    }
    const double u = std::ldexp(1.0, -24), k = static_cast<double>(order),
                 log2n = std::log2(static_cast<double>(n));
    const double d = (2 * k * u / (1 - k * u) + 4 * log2n * u) * a;
    const double e_segment = d * (1 + phase_gain(n)) + 2 * (log2n + 6) * u;
    const double overlaps = std::ceil(static_cast<double>(n) / sc.frame_period);
    const double bound = std::sqrt(overlaps) * e_segment;

    auto cpu = gpu::DeviceRegistry::instance().cpu();
    const auto whole = spectral_render(cpu, f, voice.vocoder_config(), f.frames);
    for (std::size_t chunk : {1u, 2u, 7u, 64u}) {
        const auto parts = spectral_render(cpu, f, voice.vocoder_config(), chunk);
        ASSERT_EQ(parts.size(), whole.size()) << chunk;
        const double diff = rel_rms_diff(whole, parts);
        std::printf("[spectral] chunks of %zu: relative RMS difference %.2e, bound %.2e (A %.1f)\n",
                    chunk, diff, bound, a);
        EXPECT_LE(diff, bound) << chunk;
    }
}

// The device tests below run on every kind of device backend (OpenCL on
// PoCL and Vulkan on lavapipe here), each skipping where it has no device.
class SpectralDevice : public ::testing::TestWithParam<std::string> {
  protected:
    void SetUp() override {
        std::string why;
        if (!device_or_skip(GetParam(), why))
            GTEST_SKIP() << "no " << GetParam() << " device: " << why;
    }
};

TEST_P(SpectralDevice, vocoder_matches_cpu_within_tolerance) {
    std::string why;
    auto device = device_or_skip(GetParam(), why);
    const auto& voice = FliteVoice::load("slt");
    const AcousticFrames f = voice.analyse(kText);
    const auto cpu =
        spectral_render(gpu::DeviceRegistry::instance().cpu(), f, voice.vocoder_config(), 16);
    const auto on_device = spectral_render(device, f, voice.vocoder_config(), 16);
    ASSERT_EQ(on_device.size(), cpu.size());
    const double d = max_rel_diff(cpu, on_device);
    std::printf("[spectral] %s vs CPU: max |diff| = %.2e of peak\n", GetParam().c_str(), d);
    EXPECT_LT(d, 1e-3);  // float FFTs and GEMMs on different hardware paths
}

namespace {

engine::StreamOptions spectral_options(const std::string& backend) {
    engine::StreamOptions o;
    o.voice = engine::BuiltinVoiceOptions{.vocoder = "spectral"};
    o.backend = backend;
    o.latency_ms = 150;
    o.wait_for_device = true;
    return o;
}

// Two sentences, about 8 s of speech (some 800 blocks, each on the device
// a few milliseconds of lavapipe): long enough for a failed device to be
// rebuilt while the stream is still speaking (its reader waits for the
// rebuild, below, so the rest of the text is the rebuilt device's) and for
// four streams' blocks to meet in batches (thousands of batches formed over
// five sentences, where one batch of two is asked). More text would only
// repeat the same blocks.
const std::string kSpokenText = std::string(kText) + " " + kText;

// While the GPU rebuilds its state after a device error the CPU makes the
// blocks. An offline reader takes them as fast as the CPU makes them, so
// whether the rebuilt GPU gets any of the text before it runs out is a race
// between the rebuild (seconds for lavapipe on a busy machine) and the rest
// of the text on the CPU; CI lost it once with 0 GPU blocks. The reader
// therefore waits (up to 60 s) for the rebuild, as a slow listener would.
void wait_while_the_gpu_rebuilds(const engine::Stream& s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (auto st = s.stats(); !st.gpu_ready && !st.gpu_disabled && st.gpu_failures > 0 &&
                              std::chrono::steady_clock::now() < until;
         st = s.stats())
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

// Renders kSpokenText; `fault` is injected into the device once the stream is
// ready (after its warm-up), so it hits blocks in the middle of speech.
std::vector<float> offline(engine::Engine& e, const engine::StreamOptions& o,
                           engine::StreamStats* st = nullptr, gpu::GpuFault fault = {}) {
    auto s = e.create_stream(o);
    if (fault.kind != gpu::GpuFault::None)
        gpu::DeviceRegistry::instance().open({o.backend, o.device})->inject_fault(fault);
    s->push_text(kSpokenText);
    s->end_input();
    std::vector<float> out, b(1024);
    std::size_t n;
    while ((n = s->read(b)) > 0) {
        out.insert(out.end(), b.begin(), b.begin() + n);
        if (fault.kind != gpu::GpuFault::None) wait_while_the_gpu_rebuilds(*s);
    }
    if (st) *st = s->stats();
    // The device is shared by the process: leave no fault behind for later tests.
    if (fault.kind != gpu::GpuFault::None)
        gpu::DeviceRegistry::instance().open({o.backend, o.device})->inject_fault({});
    return out;
}

}  // namespace

TEST_P(SpectralDevice, engine_runs_on_the_gpu_processor_and_matches_the_cpu) {
    engine::Engine e;
    engine::StreamStats cl_stats, cpu_stats;
    const auto on_cl = offline(e, spectral_options(GetParam()), &cl_stats);
    const auto on_cpu = offline(e, spectral_options("cpu"), &cpu_stats);
    EXPECT_GT(cl_stats.blocks_gpu, 0u) << cl_stats.gpu_note;
    EXPECT_TRUE(cl_stats.gpu_ready);
    EXPECT_EQ(cpu_stats.blocks_gpu, 0u);
    EXPECT_FALSE(cpu_stats.gpu_ready);
    ASSERT_EQ(on_cl.size(), on_cpu.size());
    EXPECT_LT(max_rel_diff(on_cpu, on_cl), 1e-3);
}

TEST_P(SpectralDevice, engine_device_failures_out_of_memory_and_lateness_are_covered_by_the_cpu) {
    engine::Engine e;
    const auto reference = offline(e, spectral_options("cpu"));
    for (auto kind :
         {gpu::GpuFault::KernelFailure, gpu::GpuFault::OutOfMemory, gpu::GpuFault::Late}) {
        const auto o = spectral_options(GetParam());
        engine::StreamStats st;
        // Late: two ops 100 ms late each, past the 150 ms budget.
        const auto out = offline(e, o, &st, {kind, 2, 100.0});
        ASSERT_EQ(out.size(), reference.size()) << kind;
        EXPECT_LT(max_rel_diff(reference, out), 1e-3) << kind;
        EXPECT_GT(st.fallbacks, 0u) << "fault " << kind << " was not covered";
        if (kind != gpu::GpuFault::Late) {
            EXPECT_GT(st.gpu_failures, 0u) << kind;
            EXPECT_GT(st.blocks_gpu, 0u) << "the GPU must come back after the fault " << kind;
        }
        std::printf(
            "[faults] kind %d: %llu fallbacks, %llu gpu failures, %llu gpu blocks, last error: "
            "%s\n",
            kind, (unsigned long long)st.fallbacks, (unsigned long long)st.gpu_failures,
            (unsigned long long)st.blocks_gpu, st.gpu_last_error.c_str());
    }
}

TEST_P(SpectralDevice, engine_repeated_failures_turn_the_gpu_off_and_speech_continues) {
    engine::Engine e;
    engine::StreamStats st;
    const auto out =
        offline(e, spectral_options(GetParam()), &st, {gpu::GpuFault::KernelFailure, 1000, 0});
    const auto reference = offline(e, spectral_options("cpu"));
    ASSERT_EQ(out.size(), reference.size());
    EXPECT_TRUE(st.gpu_disabled);
    EXPECT_FALSE(st.gpu_ready);
    EXPECT_EQ(st.gpu_failures, static_cast<std::uint64_t>(engine::BlockProcessor::kMaxFailures));
    EXPECT_EQ(st.underruns, 0u);
}

TEST_P(SpectralDevice, engine_streams_on_one_device_share_its_batches) {
    engine::Engine e;
    const auto reference = offline(e, spectral_options("cpu"));
    constexpr int kStreams = 4;
    std::vector<std::vector<float>> outs(kStreams);
    std::vector<engine::StreamStats> stats(kStreams);
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i)
        threads.emplace_back(
            [&, i] { outs[i] = offline(e, spectral_options(GetParam()), &stats[i]); });
    for (auto& t : threads) t.join();
    for (int i = 0; i < kStreams; ++i) {
        ASSERT_EQ(outs[i].size(), reference.size()) << i;
        EXPECT_LT(max_rel_diff(reference, outs[i]), 1e-3) << i;
        EXPECT_GT(stats[i].blocks_gpu, 0u) << i;
    }
    std::uint64_t largest = 0;
    std::string per_stream;  // how far each stream is from no block on the device
    for (const auto& st : stats) {
        largest = std::max<std::uint64_t>(largest, st.gpu_largest_batch);
        per_stream += " " + std::to_string(st.blocks_gpu);
    }
    std::printf(
        "[batching] %d streams: largest GPU batch %llu blocks, %llu blocks in %llu batches; "
        "blocks on the device per stream:%s\n",
        kStreams, (unsigned long long)largest, (unsigned long long)stats[0].gpu_batched_jobs,
        (unsigned long long)stats[0].gpu_batches, per_stream.c_str());
    EXPECT_GT(largest, 1u) << "concurrent streams never shared a launch";
}

INSTANTIATE_TEST_SUITE_P(Devices, SpectralDevice, ::testing::Values("opencl", "vulkan"),
                         [](const auto& info) { return info.param; });
