// MelPhaseVocoder: copy-synthesis quality against a random-phase contrast, alignment with the
// analysed audio, streaming equivalence, no allocation while streaming, silence and
// non-finite input.
#include "dsp/phase_reconstruction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <new>
#include <numbers>
#include <random>
#include <vector>

#include "audio-io/npy_file.h"
#include "dsp/log_mel.h"
#include "dsp/stft.h"
#include "dsp/window.h"

// Allocation counting for the real-time test. tests/support/realtime_guard.* (which interposes
// malloc and friends) is only linked into the engine and audio-io test programs, so this
// program counts C++ allocations itself: every replaceable operator new below counts while the
// calling thread is armed. All allocation in dsp/ goes through operator new (std::vector), and
// the self-test below proves the counter can fail.
namespace {
thread_local bool t_count_allocations = false;
std::atomic<std::size_t> g_allocations{0};

void* counted_alloc(std::size_t size, std::size_t align = 0) {
    if (t_count_allocations) g_allocations.fetch_add(1);
    if (size == 0) size = 1;
    void* p = align > alignof(std::max_align_t)
                  ? std::aligned_alloc(align, (size + align - 1) / align * align)
                  : std::malloc(size);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void* operator new(std::size_t size) {
    return counted_alloc(size);
}
void* operator new[](std::size_t size) {
    return counted_alloc(size);
}
void* operator new(std::size_t size, std::align_val_t a) {
    return counted_alloc(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
    return counted_alloc(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    try {
        return counted_alloc(size);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
    try {
        return counted_alloc(size);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}

namespace etude::dsp {
namespace {

namespace fs = std::filesystem;

class CountAllocations {
  public:
    CountAllocations() : start_(g_allocations.load()) { t_count_allocations = true; }
    ~CountAllocations() { t_count_allocations = false; }
    std::size_t count() const { return g_allocations.load() - start_; }

  private:
    std::size_t start_;
};

constexpr double kPi = std::numbers::pi;

// A 150 Hz band-limited sawtooth with 5 Hz vibrato of +-3 %, faded in and out over 20 ms.
std::vector<float> vibrato_sawtooth(double sr, std::size_t n) {
    std::vector<float> x(n);
    double phase = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double t = double(i) / sr;
        const double f0 = 150.0 * (1.0 + 0.03 * std::sin(2.0 * kPi * 5.0 * t));
        phase += 2.0 * kPi * f0 / sr;
        double v = 0.0;
        for (int h = 1; h * f0 < 0.45 * sr; ++h) v += std::sin(h * phase) / h;
        const double fade = std::min({1.0, t / 0.02, (double(n - 1 - i) / sr) / 0.02});
        x[i] = static_cast<float>(0.25 * v * fade);
    }
    return x;
}

std::vector<float> sum_of_sines(double sr, std::size_t n) {
    const double freqs[] = {220.0, 555.0, 1234.0, 3100.0, 5000.0};
    const double amps[] = {0.3, 0.2, 0.1, 0.05, 0.03};
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        double v = 0.0;
        for (int j = 0; j < 5; ++j)
            v += amps[j] * std::sin(2.0 * kPi * freqs[j] * double(i) / sr + j);
        x[i] = static_cast<float>(v);
    }
    return x;
}

std::vector<float> speech_fixture(const char* name) {
#ifdef ETUDE_TEST_DATA
    const fs::path data = ETUDE_TEST_DATA;
#else
    const fs::path data = fs::path(__FILE__).parent_path().parent_path() / "data";
#endif
    const fs::path path = data / "frontend" / (std::string(name) + "_audio.npy");
    return audio_io::read_npy(path.string()).data;
}

// Mean |a - b| over frames [skip, frames - skip) of two (n_mels, frames) log-mel spectrograms,
// both first floored 60 dB (ln 1000 nepers) below the loudest value of `a`: bands further down
// are inaudible next to the rest and measure only leakage, which would swamp the mean.
double log_mel_distance(const std::vector<float>& a, const std::vector<float>& b,
                        std::size_t n_mels, std::size_t frames, std::size_t skip) {
    const double floor = *std::max_element(a.begin(), a.end()) - std::log(1000.0);
    double sum = 0.0;
    std::size_t count = 0;
    for (std::size_t m = 0; m < n_mels; ++m) {
        for (std::size_t t = skip; t + skip < frames; ++t) {
            sum += std::abs(std::max<double>(a[m * frames + t], floor) -
                            std::max<double>(b[m * frames + t], floor));
            ++count;
        }
    }
    return sum / double(count);
}

// The stream with latency_samples() removed, cut to `length` samples: sample i reconstructs
// audio sample i.
std::vector<float> aligned(const std::vector<float>& stream, std::size_t latency,
                           std::size_t length) {
    EXPECT_GE(stream.size(), latency + length);
    return std::vector<float>(stream.begin() + static_cast<std::ptrdiff_t>(latency),
                              stream.begin() + static_cast<std::ptrdiff_t>(latency + length));
}

// The contrast: the same magnitude estimate with a fresh uniformly random phase in every bin
// of every frame, overlap-added by IstftStream (no look-ahead, so stream sample p is audio
// sample p - pad_left).
std::vector<float> random_phase_synthesis(const LogMelConfig& config, MelPhaseVocoder& vocoder,
                                          const std::vector<float>& log_mel, std::size_t frames,
                                          unsigned seed) {
    const std::size_t n_mels = config.n_mels, bins = config.n_bins(), hop = config.hop;
    const std::vector<float> window = log_mel_window(config);
    IstftStream istft(config.n_fft, hop, window);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uniform(0.0, 2.0 * kPi);
    std::vector<float> column(n_mels), magnitude(bins), out(frames * hop + istft.latency());
    std::vector<std::complex<float>> spectrum(bins);
    for (std::size_t t = 0; t < frames; ++t) {
        for (std::size_t m = 0; m < n_mels; ++m) column[m] = log_mel[m * frames + t];
        vocoder.estimate_magnitude(column, magnitude);
        for (std::size_t k = 0; k < bins; ++k)
            spectrum[k] = std::polar(magnitude[k], float(uniform(rng)));
        istft.push_frame(spectrum, std::span(out).subspan(t * hop, hop));
    }
    istft.drain(std::span(out).subspan(frames * hop));
    return aligned(out, config.pad_left(), out.size() - config.pad_left());
}

struct CopySynthesis {
    double rtpghi;
    double random_phase;
};

// Analyse, resynthesise, re-analyse with the same front end; log-mel distances to the input
// for RTPGHI and for the random-phase contrast. The outer 3 frames are left out for both (the
// contrast's IstftStream fades them).
CopySynthesis copy_synthesis(const LogMelConfig& config, const std::vector<float>& audio) {
    LogMelAnalyzer analyzer(config);
    MelPhaseVocoder vocoder(config);
    std::size_t frames = 0;
    const std::vector<float> mel = analyzer.analyze(audio, &frames);
    const std::vector<float> stream = vocoder.synthesize(mel, frames);
    EXPECT_EQ(stream.size(), frames * config.hop + vocoder.flush_samples());

    std::size_t frames_again = 0;
    const auto again =
        analyzer.analyze(aligned(stream, vocoder.latency_samples(), audio.size()), &frames_again);
    EXPECT_EQ(frames_again, frames);
    std::vector<float> random = random_phase_synthesis(config, vocoder, mel, frames, 99);
    random.resize(audio.size());
    const auto again_random = analyzer.analyze(random, &frames_again);
    return {log_mel_distance(mel, again, config.n_mels, frames, 3),
            log_mel_distance(mel, again_random, config.n_mels, frames, 3)};
}

void expect_good_copy_synthesis(const LogMelConfig& config, const char* config_name,
                                const char* signal_name, const std::vector<float>& audio,
                                double bound) {
    const CopySynthesis d = copy_synthesis(config, audio);
    std::printf("%-8s %-16s log-mel distance: RTPGHI %.3f, random phase %.3f (bound %.2f)\n",
                config_name, signal_name, d.rtpghi, d.random_phase, bound);
    EXPECT_LT(d.rtpghi, bound) << config_name << " " << signal_name;
    // Clearly better than a broken phase, not just within the bound.
    EXPECT_LT(d.rtpghi, 0.6 * d.random_phase) << config_name << " " << signal_name;
    EXPECT_GT(d.random_phase, bound) << "the bound does not separate a broken phase";
}

TEST(MelPhaseVocoder, copy_synthesis_of_harmonic_signals_keeps_the_log_mel) {
    // Measured (mean |log-mel difference| in nepers, 60 dB floor; Release build, x86-64):
    //                        RTPGHI   random phase
    //   HiFi-GAN sawtooth     0.299    0.770
    //   HiFi-GAN sines        0.089    0.239
    //   HiFi-GAN speech-like  0.163    0.418
    //   Vocos sawtooth        0.311    0.770
    //   Vocos sines           0.101    0.214
    //   Vocos speech-like     0.298    0.705
    // Most of what remains is not phase: mel bands do not resolve the upper harmonics, so the
    // magnitude estimate there is smooth, and no phase makes a smooth estimate consistent with
    // a harmonic re-analysis. Each bound leaves about 30 % margin over its measurement and is
    // exceeded by the random-phase contrast; the phases also must beat random by 40 %.
    for (auto [config, name] : {std::pair{LogMelConfig::hifigan(), "HiFi-GAN"},
                                std::pair{LogMelConfig::vocos(), "Vocos"}}) {
        const std::size_t n = static_cast<std::size_t>(config.sample_rate * 0.8);
        expect_good_copy_synthesis(config, name, "vibrato sawtooth",
                                   vibrato_sawtooth(config.sample_rate, n), 0.40);
        expect_good_copy_synthesis(config, name, "sum of sines",
                                   sum_of_sines(config.sample_rate, n), 0.15);
    }
    expect_good_copy_synthesis(LogMelConfig::hifigan(), "HiFi-GAN", "speech-like",
                               speech_fixture("hifigan"), 0.25);
    expect_good_copy_synthesis(LogMelConfig::vocos(), "Vocos", "speech-like",
                               speech_fixture("vocos"), 0.40);
}

// Where the RMS envelope (64-sample window) of x first crosses `level` going up (rising) or
// down, searching [from, to); -1 if it does not.
long envelope_crossing(const std::vector<float>& x, long from, long to, double level, bool rising) {
    const auto rms = [&](long centre) {
        double e = 0.0;
        int n = 0;
        for (long j = centre - 32; j < centre + 32; ++j) {
            if (j >= 0 && j < static_cast<long>(x.size())) {
                e += double(x[j]) * x[j];
                ++n;
            }
        }
        return std::sqrt(e / n);
    };
    double previous = rms(from);
    for (long i = from + 1; i < to; ++i) {
        const double current = rms(i);
        if (rising ? (previous < level && current >= level)
                   : (previous >= level && current < level)) {
            return i;
        }
        previous = current;
    }
    return -1;
}

TEST(MelPhaseVocoder, output_lines_up_with_the_analysed_audio_after_the_stated_latency) {
    // 440 Hz bursts switching every 3000 samples. With latency_samples() removed, every on and
    // off edge of the reconstruction (half-level crossing of its envelope) must be within half
    // a hop of the original's; an error of one hop or of the padding would be 256+ off.
    // (Measured: within 75 samples, onsets a little late, offsets a little early.)
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        const std::size_t n = 24000;
        std::vector<float> audio(n, 0.0f);
        for (std::size_t i = 0; i < n; ++i) {
            if ((i / 3000) % 2 == 1) {
                audio[i] =
                    0.4f * float(std::sin(2.0 * kPi * 440.0 * double(i) / config.sample_rate));
            }
        }
        LogMelAnalyzer analyzer(config);
        MelPhaseVocoder vocoder(config);
        std::size_t frames = 0;
        const auto mel = analyzer.analyze(audio, &frames);
        const auto out = aligned(vocoder.synthesize(mel, frames), vocoder.latency_samples(), n);
        const double half_level = 0.5 * 0.4 / std::sqrt(2.0);
        for (long edge = 3000; edge < static_cast<long>(n); edge += 3000) {
            const bool rising = (edge / 3000) % 2 == 1;
            const long want =
                envelope_crossing(audio, edge - 1500, edge + 1500, half_level, rising);
            const long got = envelope_crossing(out, edge - 1500, edge + 1500, half_level, rising);
            ASSERT_GE(want, 0);
            ASSERT_GE(got, 0) << "no edge near " << edge;
            EXPECT_LE(std::abs(got - want), static_cast<long>(config.hop / 2))
                << (rising ? "onset" : "offset") << " at " << edge << ", pad " << config.pad_left();
        }
    }
}

// RTPGHI alone, fed the true STFT magnitudes of x (Hann 1024, hop 256, frames starting at
// t * hop): spectral convergence || |STFT(y)| - |STFT(x)| || / || |STFT(x)| || in dB of the
// reconstruction y, after removing latency_samples().
double rtpghi_spectral_convergence_db(const std::vector<float>& x, double lambda) {
    const std::size_t n_fft = 1024, hop = 256;
    const std::vector<float> window = make_window(WindowType::Hann, n_fft, true);
    const auto frames = stft_offline(x, n_fft, hop, window, false);
    RtpghiSynthesizer synth(n_fft, hop, window, lambda);
    std::vector<float> out(frames.size() * hop + synth.flush_samples()), magnitude(n_fft / 2 + 1);
    for (std::size_t t = 0; t < frames.size(); ++t) {
        for (std::size_t k = 0; k < magnitude.size(); ++k) magnitude[k] = std::abs(frames[t][k]);
        synth.push_frame(magnitude, std::span(out).subspan(t * hop, hop));
    }
    synth.flush(std::span(out).subspan(frames.size() * hop));
    // Without padding the frames cover x only up to the end of the last one.
    const std::size_t covered = (frames.size() - 1) * hop + n_fft;
    const auto again =
        stft_offline(aligned(out, synth.latency_samples(), covered), n_fft, hop, window, false);
    EXPECT_EQ(again.size(), frames.size());
    double error = 0.0, energy = 0.0;
    for (std::size_t t = 2; t + 2 < frames.size(); ++t) {
        for (std::size_t k = 0; k < magnitude.size(); ++k) {
            const double a = std::abs(frames[t][k]), b = std::abs(again[t][k]);
            error += (a - b) * (a - b);
            energy += a * a;
        }
    }
    return 10.0 * std::log10(error / energy);
}

TEST(RtpghiSynthesizer, true_magnitudes_give_a_consistent_reconstruction) {
    // From exact STFT magnitudes RTPGHI should rebuild a signal whose STFT magnitude is close
    // to them. Measured: -33.3 dB (vibrato sawtooth), -38.7 dB (chirp 300 -> 2300 Hz), -38.1 dB
    // (440 Hz tone). The Gaussian-equivalent lambda matters: 0.15 L^2 or 0.4 L^2 instead of
    // the Hann value 0.25645 L^2 measure 5 to 26 dB worse, which checks both the constant and
    // the sign conventions of the two phase derivatives.
    const double sr = 22050.0;
    const std::size_t n = 20000;
    std::vector<float> chirp(n), tone(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double t = double(i) / sr;
        chirp[i] = 0.25f * float(std::sin(2.0 * kPi * (300.0 * t + 1000.0 * t * t)));
        tone[i] = 0.25f * float(std::sin(2.0 * kPi * 440.0 * t));
    }
    const double lambda = RtpghiSynthesizer::hann_lambda(1024);
    EXPECT_DOUBLE_EQ(lambda, 0.25645 * 1024.0 * 1024.0);
    for (const auto& [name, x] : {std::pair{"vibrato sawtooth", vibrato_sawtooth(sr, n)},
                                  std::pair{"chirp", chirp}, std::pair{"tone", tone}}) {
        const double sc = rtpghi_spectral_convergence_db(x, lambda);
        const double narrow = rtpghi_spectral_convergence_db(x, lambda * 0.15 / 0.25645);
        const double wide = rtpghi_spectral_convergence_db(x, lambda * 0.4 / 0.25645);
        std::printf(
            "RTPGHI from true magnitudes, %-16s: %.1f dB (lambda 0.15 L^2: %.1f dB, "
            "0.4 L^2: %.1f dB)\n",
            name, sc, narrow, wide);
        EXPECT_LT(sc, -28.0) << name;
        EXPECT_LT(sc, narrow - 4.0) << name;
        EXPECT_LT(sc, wide - 4.0) << name;
    }
}

// Frame-major copy of a (n_mels, frames) spectrogram, as push_frames takes it.
std::vector<float> frame_major(const std::vector<float>& mel, std::size_t n_mels,
                               std::size_t frames) {
    std::vector<float> out(mel.size());
    for (std::size_t m = 0; m < n_mels; ++m) {
        for (std::size_t t = 0; t < frames; ++t) out[t * n_mels + m] = mel[m * frames + t];
    }
    return out;
}

TEST(MelPhaseVocoder, streaming_in_any_pattern_gives_the_offline_samples) {
    const LogMelConfig config = LogMelConfig::vocos();
    const std::vector<float> audio = speech_fixture("vocos");
    LogMelAnalyzer analyzer(config);
    std::size_t frames = 0;
    const auto mel = analyzer.analyze(audio, &frames);
    const auto frame_data = frame_major(mel, config.n_mels, frames);
    MelPhaseVocoder offline(config);
    const std::vector<float> reference = offline.synthesize(mel, frames);

    std::mt19937 rng(5);
    std::uniform_int_distribution<std::size_t> chunk(0, 7);
    MelPhaseVocoder streamed(config), interleaved(config);
    for (int round = 0; round < 3; ++round) {
        // Round 1 reuses the object after flush, round 2 after a reset() in mid-stream.
        if (round == 2) {
            std::vector<float> junk(5 * config.hop);
            streamed.push_frames(frame_data, 5, junk);
            streamed.reset();
        }
        std::vector<float> out(reference.size(), -1.0f), other(reference.size(), -1.0f);
        std::size_t t = 0;
        while (t < frames) {
            const std::size_t k = std::min(chunk(rng), frames - t);
            streamed.push_frames(std::span(frame_data).subspan(t * config.n_mels), k,
                                 std::span(out).subspan(t * config.hop));
            // A second object fed one frame at a time in between: no shared hidden state.
            for (std::size_t j = t; j < t + k; ++j) {
                interleaved.push_frame(
                    std::span(frame_data).subspan(j * config.n_mels, config.n_mels),
                    std::span(other).subspan(j * config.hop, config.hop));
            }
            t += k;
        }
        streamed.flush(std::span(out).subspan(frames * config.hop));
        interleaved.flush(std::span(other).subspan(frames * config.hop));
        ASSERT_EQ(out, reference) << "round " << round;
        ASSERT_EQ(other, reference) << "round " << round;
    }
}

TEST(MelPhaseVocoder, allocation_counter_detects_allocations) {
    // Without this the next test could pass with a counter that never counts.
    CountAllocations counter;
    std::vector<float>* v = new std::vector<float>(100);
    delete v;
    EXPECT_GE(counter.count(), 2u);
}

TEST(MelPhaseVocoder, push_frame_and_flush_do_not_allocate) {
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        LogMelAnalyzer analyzer(config);
        std::size_t frames = 0;
        const auto mel = analyzer.analyze(vibrato_sawtooth(config.sample_rate, 12000), &frames);
        const auto data = frame_major(mel, config.n_mels, frames);
        MelPhaseVocoder vocoder(config);
        std::vector<float> out(frames * config.hop + vocoder.flush_samples());
        std::vector<float> silent(config.n_mels, -std::numeric_limits<float>::infinity());
        std::size_t allocations = 0;
        {
            CountAllocations counter;
            for (std::size_t t = 0; t < frames; ++t) {
                vocoder.push_frame(std::span(data).subspan(t * config.n_mels, config.n_mels),
                                   std::span(out).subspan(t * config.hop, config.hop));
            }
            vocoder.push_frame(silent, std::span(out).first(config.hop));  // silence path too
            vocoder.flush(std::span(out).subspan(frames * config.hop));
            vocoder.reset();
            allocations = counter.count();
        }
        EXPECT_EQ(allocations, 0u);
    }
}

TEST(MelPhaseVocoder, silence_in_gives_silence_out) {
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        LogMelAnalyzer analyzer(config);
        std::size_t frames = 0;
        const auto mel = analyzer.analyze(std::vector<float>(8000, 0.0f), &frames);
        MelPhaseVocoder vocoder(config);
        for (float v : vocoder.synthesize(mel, frames)) ASSERT_EQ(v, 0.0f);
    }
}

TEST(MelPhaseVocoder, non_finite_and_extreme_log_mel_give_finite_output) {
    const LogMelConfig config = LogMelConfig::hifigan();
    MelPhaseVocoder vocoder(config);
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(config.hop);
    std::vector<float> frame(config.n_mels);
    // All -inf, all hugely negative, then frames mixing silence with real values, a NaN and
    // +inf, then silence again.
    for (int kind = 0; kind < 6; ++kind) {
        for (std::size_t m = 0; m < config.n_mels; ++m) {
            switch (kind) {
                case 0:
                    frame[m] = -inf;
                    break;
                case 1:
                    frame[m] = -1e30f;
                    break;
                case 2:
                    frame[m] = m % 2 ? -inf : -2.0f;
                    break;
                case 3:
                    frame[m] = m == 7 ? nan : (m == 30 ? inf : -3.0f);
                    break;
                case 4:
                    frame[m] = 1e30f;
                    break;
                default:
                    frame[m] = -inf;
                    break;
            }
        }
        for (int repeat = 0; repeat < 3; ++repeat) {
            vocoder.push_frame(frame, out);
            for (float v : out) ASSERT_TRUE(std::isfinite(v)) << "kind " << kind;
            if (kind <= 1 && repeat < 2) {
                for (float v : out) ASSERT_EQ(v, 0.0f) << "kind " << kind;
            }
        }
    }
    std::vector<float> tail(vocoder.flush_samples());
    vocoder.flush(tail);
    for (float v : tail) ASSERT_TRUE(std::isfinite(v));
}

TEST(MelMagnitudeInverter, reproduces_mel_frames_that_come_from_a_spectrum) {
    // For a smooth, positive spectrum the estimate's mel projection is the input mel: the
    // pseudo-inverse solves B s = m, and the clamp does not act on a smooth positive answer.
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        MelFilterbank bank(config.sample_rate, config.n_fft, config.n_mels, config.fmin,
                           config.fmax, config.scale, config.norm);
        MelMagnitudeInverter inverter(bank);
        std::vector<float> spectrum(bank.n_bins()), mel(bank.n_mels()), estimate(bank.n_bins()),
            mel_again(bank.n_mels());
        for (std::size_t k = 0; k < spectrum.size(); ++k) {
            spectrum[k] = 2.0f + std::sin(0.01f * float(k)) + 0.5f * std::cos(0.003f * float(k));
        }
        bank.apply(spectrum, mel);
        inverter.apply(mel, estimate);
        bank.apply(estimate, mel_again);
        for (std::size_t m = 0; m < mel.size(); ++m) {
            EXPECT_NEAR(mel_again[m], mel[m], 2e-3 * mel[m]) << m;
        }
        for (float s : estimate) EXPECT_GE(s, 0.0f);
    }
}

}  // namespace
}  // namespace etude::dsp
