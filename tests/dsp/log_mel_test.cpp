// LogMelAnalyzer against an independent PyTorch reference (tools/make_frontend_reference.py
// wrote tests/data/frontend/), plus structural properties: frame counts as torch.stft computes
// them, padding limits, tones landing in their mel band, silence at the floor.
#include "dsp/log_mel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "audio-io/npy_file.h"

namespace etude::dsp {
namespace {

namespace fs = std::filesystem;

#ifdef ETUDE_TEST_DATA
const fs::path kFrontendData = fs::path(ETUDE_TEST_DATA) / "frontend";
#else
const fs::path kFrontendData = fs::path(__FILE__).parent_path().parent_path() / "data" / "frontend";
#endif

// Max |ours - reference| over the whole spectrogram, after checking the shapes agree.
double max_abs_diff_to_reference(const LogMelConfig& config, const char* name) {
    const auto audio =
        audio_io::read_npy((kFrontendData / (std::string(name) + "_audio.npy")).string());
    const auto ref =
        audio_io::read_npy((kFrontendData / (std::string(name) + "_mel.npy")).string());
    EXPECT_EQ(audio.shape.size(), 1u);
    EXPECT_EQ(ref.shape.size(), 2u);
    if (ref.shape.size() != 2) return INFINITY;

    LogMelAnalyzer analyzer(config);
    std::size_t frames = 0;
    const std::vector<float> mel = analyzer.analyze(audio.data, &frames);
    EXPECT_EQ(ref.shape[0], config.n_mels);
    EXPECT_EQ(ref.shape[1], frames);
    if (ref.shape[0] != config.n_mels || ref.shape[1] != frames) return INFINITY;
    double worst = 0.0;
    for (std::size_t i = 0; i < mel.size(); ++i) {
        worst = std::max(worst, std::abs(double(mel[i]) - double(ref.data[i])));
    }
    return worst;
}

TEST(LogMelAnalyzer, hifigan_front_end_matches_pytorch_reference) {
    const double worst = max_abs_diff_to_reference(LogMelConfig::hifigan(), "hifigan");
    std::printf("HiFi-GAN log-mel: max |diff| to the float64 PyTorch reference %.3g\n", worst);
    EXPECT_LT(worst, 1e-4);
}

TEST(LogMelAnalyzer, vocos_front_end_matches_pytorch_reference) {
    const double worst = max_abs_diff_to_reference(LogMelConfig::vocos(), "vocos");
    std::printf("Vocos log-mel: max |diff| to the float64 PyTorch reference %.3g\n", worst);
    EXPECT_LT(worst, 1e-4);
}

TEST(LogMelAnalyzer, frame_counts_follow_torch_stft) {
    // Written the way the model code gets them, not through pad_left(): torch.stft with
    // center=True gives 1 + len // hop frames; HiFi-GAN's (n_fft - hop) / 2 padding each side
    // with center=False gives 1 + (len + n_fft - hop - n_fft) // hop = len // hop.
    LogMelAnalyzer hifigan(LogMelConfig::hifigan());
    LogMelAnalyzer vocos(LogMelConfig::vocos());
    for (std::size_t len : {1024u, 1025u, 1279u, 1280u, 2000u, 4096u, 11025u}) {
        std::vector<float> x(len);
        for (std::size_t i = 0; i < len; ++i) x[i] = std::sin(0.01f * float(i));
        std::size_t frames = 0;
        const auto a = hifigan.analyze(x, &frames);
        EXPECT_EQ(frames, len / 256) << len;
        EXPECT_EQ(a.size(), 80 * frames);
        EXPECT_EQ(LogMelConfig::hifigan().frame_count(len), len / 256);
        const auto b = vocos.analyze(x, &frames);
        EXPECT_EQ(frames, 1 + len / 256) << len;
        EXPECT_EQ(b.size(), 100 * frames);
    }
    // An odd geometry: n_fft 400, hop 160, win 300 (Whisper-like). Center: 1 + len // 160.
    // ReflectHalf pads (400 - 160) / 2 = 120: 1 + (len + 240 - 400) // 160.
    LogMelConfig odd = LogMelConfig::vocos();
    odd.n_fft = 400;
    odd.hop = 160;
    odd.win_length = 300;
    odd.n_mels = 40;
    odd.sample_rate = 16000.0;
    odd.fmax = 8000.0;
    for (MelPadding padding : {MelPadding::Center, MelPadding::ReflectHalf}) {
        odd.padding = padding;
        LogMelAnalyzer analyzer(odd);
        for (std::size_t len : {401u, 479u, 480u, 1000u, 1601u}) {
            std::vector<float> x(len, 0.25f);
            std::size_t frames = 0;
            analyzer.analyze(x, &frames);
            const std::size_t want =
                padding == MelPadding::Center ? 1 + len / 160 : 1 + (len + 240 - 400) / 160;
            EXPECT_EQ(frames, want) << len;
        }
    }
}

TEST(LogMelAnalyzer, signals_too_short_for_reflection_padding_are_refused) {
    // torch.nn.functional.pad(mode="reflect") requires pad < length.
    LogMelAnalyzer vocos(LogMelConfig::vocos());      // pad 512
    LogMelAnalyzer hifigan(LogMelConfig::hifigan());  // pad 384
    EXPECT_THROW(vocos.analyze(std::vector<float>(512, 0.1f)), std::invalid_argument);
    EXPECT_THROW(vocos.analyze(std::vector<float>{}), std::invalid_argument);
    EXPECT_THROW(hifigan.analyze(std::vector<float>(384, 0.1f)), std::invalid_argument);
    std::size_t frames = 0;
    vocos.analyze(std::vector<float>(513, 0.1f), &frames);
    EXPECT_EQ(frames, 3u);
    hifigan.analyze(std::vector<float>(385, 0.1f), &frames);
    EXPECT_EQ(frames, 1u);
}

TEST(LogMelAnalyzer, pure_tone_peaks_in_the_band_centred_on_it) {
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        LogMelAnalyzer analyzer(config);
        const std::size_t n_mels = config.n_mels;
        // Band m's centre is mel point m + 1 of n_mels + 2 equally spaced in mel from fmin to
        // fmax; the tone sits exactly there.
        const double lo = hz_to_mel(config.fmin, config.scale);
        const double hi = hz_to_mel(config.fmax, config.scale);
        for (std::size_t band : {std::size_t{12}, n_mels / 3, n_mels / 2, n_mels - 10}) {
            const double hz =
                mel_to_hz(lo + (hi - lo) * double(band + 1) / double(n_mels + 1), config.scale);
            std::vector<float> x(8192);
            for (std::size_t i = 0; i < x.size(); ++i) {
                x[i] =
                    0.5f *
                    float(std::sin(2.0 * std::numbers::pi * hz * double(i) / config.sample_rate));
            }
            std::size_t frames = 0;
            const auto mel = analyzer.analyze(x, &frames);
            const std::size_t t = frames / 2;
            std::size_t best = 0;
            for (std::size_t m = 1; m < n_mels; ++m) {
                if (mel[m * frames + t] > mel[best * frames + t]) best = m;
            }
            EXPECT_EQ(best, band) << hz << " Hz";
            // Bands far from the tone see only window leakage.
            EXPECT_LT(mel[(band > n_mels / 2 ? band - 8 : band + 8) * frames + t],
                      mel[band * frames + t] - 4.0f);
        }
    }
}

TEST(LogMelAnalyzer, silence_sits_exactly_at_the_log_floor) {
    for (const LogMelConfig& config : {LogMelConfig::hifigan(), LogMelConfig::vocos()}) {
        LogMelAnalyzer analyzer(config);
        std::size_t frames = 0;
        const auto mel = analyzer.analyze(std::vector<float>(4000, 0.0f), &frames);
        ASSERT_GT(frames, 0u);
        for (float v : mel) ASSERT_EQ(v, std::log(static_cast<float>(config.log_floor)));
    }
}

TEST(LogMelAnalyzer, amplitude_scaling_shifts_the_log_mel) {
    // With power 1 the mel magnitude is linear in the signal: doubling the audio adds log 2
    // wherever the floor and epsilon do not act.
    LogMelAnalyzer analyzer(LogMelConfig::vocos());
    std::vector<float> x(6000), y(6000);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = 0.2f * std::sin(0.05f * float(i)) + 0.1f * std::sin(0.31f * float(i) + 1.0f);
        y[i] = 2.0f * x[i];
    }
    std::size_t frames = 0;
    const auto a = analyzer.analyze(x, &frames);
    const auto b = analyzer.analyze(y, &frames);
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] > -10.0f) {
            EXPECT_NEAR(b[i] - a[i], std::log(2.0f), 1e-3) << i;
        }
    }
}

TEST(LogMelConfig, invalid_fields_are_named) {
    LogMelConfig c = LogMelConfig::vocos();
    c.win_length = 2048;
    EXPECT_THROW(LogMelAnalyzer{c}, std::invalid_argument);
    c = LogMelConfig::vocos();
    c.hop = 0;
    EXPECT_THROW(LogMelAnalyzer{c}, std::invalid_argument);
    c = LogMelConfig::vocos();
    c.log_floor = 0.0;
    EXPECT_THROW(LogMelAnalyzer{c}, std::invalid_argument);
}

}  // namespace
}  // namespace etude::dsp
