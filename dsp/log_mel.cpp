#include "dsp/log_mel.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dsp/window.h"

namespace etude::dsp {

namespace {

const LogMelConfig& validated(const LogMelConfig& config) {
    config.validate();
    return config;
}

}  // namespace

std::vector<float> log_mel_window(const LogMelConfig& config) {
    config.validate();
    std::vector<float> window(config.n_fft, 0.0f);
    const std::vector<float> hann =
        make_window(WindowType::Hann, config.win_length, /*periodic=*/true);
    std::copy(hann.begin(), hann.end(),
              window.begin() + static_cast<std::ptrdiff_t>((config.n_fft - config.win_length) / 2));
    return window;
}

LogMelConfig LogMelConfig::hifigan() {
    return LogMelConfig{.sample_rate = 22050.0,
                        .n_fft = 1024,
                        .hop = 256,
                        .win_length = 1024,
                        .n_mels = 80,
                        .fmin = 0.0,
                        .fmax = 8000.0,
                        .scale = MelScale::Slaney,
                        .norm = MelNorm::Slaney,
                        .power = 1.0,
                        .magnitude_eps = 1e-9,
                        .log_floor = 1e-5,
                        .padding = MelPadding::ReflectHalf};
}

LogMelConfig LogMelConfig::vocos() {
    return LogMelConfig{.sample_rate = 24000.0,
                        .n_fft = 1024,
                        .hop = 256,
                        .win_length = 1024,
                        .n_mels = 100,
                        .fmin = 0.0,
                        .fmax = 12000.0,
                        .scale = MelScale::Htk,
                        .norm = MelNorm::None,
                        .power = 1.0,
                        .magnitude_eps = 0.0,
                        .log_floor = 1e-7,
                        .padding = MelPadding::Center};
}

std::size_t LogMelConfig::frame_count(std::size_t samples) const {
    const std::size_t padded = samples + 2 * pad_left();
    if (padded < n_fft) return 0;
    return 1 + (padded - n_fft) / hop;
}

void LogMelConfig::validate() const {
    const auto bad = [](const std::string& what) {
        throw std::invalid_argument("LogMelConfig: " + what);
    };
    if (!(sample_rate > 0.0)) bad("sample_rate must be > 0");
    if (n_fft < 2) bad("n_fft must be >= 2");
    if (hop < 1 || hop > n_fft) bad("hop must be in [1, n_fft], got " + std::to_string(hop));
    if (win_length < 1 || win_length > n_fft) {
        bad("win_length must be in [1, n_fft], got " + std::to_string(win_length));
    }
    if (n_mels < 1) bad("n_mels must be >= 1");
    if (!(fmin >= 0.0) || !(fmax > fmin)) bad("need 0 <= fmin < fmax");
    if (!(power > 0.0)) bad("power must be > 0");
    if (!(magnitude_eps >= 0.0)) bad("magnitude_eps must be >= 0");
    // A zero floor would let silence become -inf, which no model was trained on.
    if (!(log_floor > 0.0)) bad("log_floor must be > 0");
}

LogMelAnalyzer::LogMelAnalyzer(const LogMelConfig& config)
    : config_(validated(config)),
      filterbank_(config.sample_rate, config.n_fft, config.n_mels, config.fmin, config.fmax,
                  config.scale, config.norm),
      window_(log_mel_window(config)),
      fft_(config.n_fft),
      windowed_(config.n_fft),
      spectrum_(config.n_bins()),
      magnitude_(config.n_bins()),
      mel_(config.n_mels) {}

void LogMelAnalyzer::analyze_frame(std::span<const float> frame, std::span<float> log_mel) {
    assert(frame.size() == config_.n_fft && log_mel.size() == config_.n_mels);
    for (std::size_t i = 0; i < config_.n_fft; ++i) windowed_[i] = frame[i] * window_[i];
    fft_.forward(windowed_, spectrum_);
    const double eps = config_.magnitude_eps;
    const double power = config_.power;
    for (std::size_t k = 0; k < spectrum_.size(); ++k) {
        // In double: with eps = 1e-9 the sum must not lose the epsilon against re^2 + im^2.
        const double re = spectrum_[k].real(), im = spectrum_[k].imag();
        const double mag = std::sqrt(re * re + im * im + eps);
        magnitude_[k] = static_cast<float>(power == 1.0 ? mag : std::pow(mag, power));
    }
    filterbank_.apply(magnitude_, mel_);
    const float floor = static_cast<float>(config_.log_floor);
    for (std::size_t m = 0; m < config_.n_mels; ++m)
        log_mel[m] = std::log(std::max(mel_[m], floor));
}

std::vector<float> LogMelAnalyzer::analyze(std::span<const float> audio, std::size_t* frames_out) {
    const std::size_t pad = config_.pad_left();
    const std::size_t frames = config_.frame_count(audio.size());
    // torch.nn.functional.pad(mode="reflect") needs pad < length: mirroring must not run past
    // the far end of the signal.
    if (audio.size() <= pad || frames == 0) {
        throw std::invalid_argument(
            "LogMelAnalyzer: " + std::to_string(audio.size()) +
            " samples are too short for reflection padding of " + std::to_string(pad) +
            " samples and an n_fft of " + std::to_string(config_.n_fft) + " (need at least " +
            std::to_string(
                std::max(pad + 1, config_.n_fft > 2 * pad ? config_.n_fft - 2 * pad : 1)) +
            ")");
    }

    const std::size_t n_mels = config_.n_mels, n_fft = config_.n_fft, hop = config_.hop;
    const auto size = static_cast<std::ptrdiff_t>(audio.size());
    std::vector<float> frame(n_fft), column(n_mels), out(n_mels * frames);
    for (std::size_t t = 0; t < frames; ++t) {
        for (std::size_t i = 0; i < n_fft; ++i) {
            // Position in the audio; one reflection per side is enough because pad < size.
            std::ptrdiff_t p =
                static_cast<std::ptrdiff_t>(t * hop + i) - static_cast<std::ptrdiff_t>(pad);
            if (p < 0) p = -p;
            if (p >= size) p = 2 * (size - 1) - p;
            frame[i] = audio[static_cast<std::size_t>(p)];
        }
        analyze_frame(frame, column);
        for (std::size_t m = 0; m < n_mels; ++m) out[m * frames + t] = column[m];
    }
    if (frames_out) *frames_out = frames;
    return out;
}

}  // namespace etude::dsp
