// Log-mel spectrograms computed exactly the way a neural vocoder was trained on them.
//
// A vocoder only sounds right on features made with its own training front end; the usual ones
// differ in padding, magnitude epsilon, mel convention and log floor. LogMelConfig spells out all
// of these, and its presets reproduce:
//   hifigan(): HiFi-GAN's meldataset.mel_spectrogram (22.05 kHz, 80 Slaney mels to 8 kHz,
//     sqrt(|X|^2 + 1e-9), log(max(mel, 1e-5)), reflect-pad (n_fft - hop) / 2, no centring);
//   vocos(): Vocos' MelSpectrogramFeatures (24 kHz, 100 HTK mels to 12 kHz without norm, |X|,
//     log(max(mel, 1e-7)), torch.stft(center=True) reflect padding).
//
// Frame t (hop = config.hop) is the DFT of window[i] * padded[t * hop + i], i in [0, n_fft),
// where `padded` is the audio with pad_left() samples mirrored in front (numpy/torch "reflect":
// the edge sample is not repeated) and as many behind. The window is a periodic Hann of
// win_length samples centred in n_fft (zeros either side, as torch.stft does). Frame t is
// therefore centred on audio sample t * hop + n_fft / 2 - pad_left(): t * hop for Center, and
// t * hop + hop / 2 for ReflectHalf. Values are natural logs of mel magnitudes (power = 1) or
// mel powers (power = 2).
//
// Ownership/threading: LogMelAnalyzer owns its filterbank, window, FFT plan and scratch buffers,
// all made in the constructor. analyze() allocates its result (not real-time safe);
// analyze_frame() does not allocate. Both use the scratch buffers, so one analyzer must not be
// used by two threads at once.
#pragma once

#include <complex>
#include <cstddef>
#include <span>
#include <vector>

#include "dsp/fft.h"
#include "dsp/mel_filterbank.h"

namespace etude::dsp {

enum class MelPadding {
    // Reflect-pad (n_fft - hop) / 2 on each side, frames start at the padded signal's start
    // (HiFi-GAN: F.pad(reflect) then torch.stft(center=False)).
    ReflectHalf,
    // Reflect-pad n_fft / 2 on each side, frame t centred on sample t * hop (torch.stft
    // center=True, torchaudio, Vocos).
    Center,
};

struct LogMelConfig {
    double sample_rate = 22050.0;
    std::size_t n_fft = 1024;
    std::size_t hop = 256;
    std::size_t win_length = 1024;  // periodic Hann, <= n_fft
    std::size_t n_mels = 80;
    double fmin = 0.0;
    double fmax = 8000.0;
    MelScale scale = MelScale::Slaney;
    MelNorm norm = MelNorm::Slaney;
    double power = 1.0;           // 1: magnitude, 2: power; applied to the magnitude below
    double magnitude_eps = 1e-9;  // magnitude = sqrt(re^2 + im^2 + magnitude_eps)
    double log_floor = 1e-5;      // log(max(mel, log_floor))
    MelPadding padding = MelPadding::ReflectHalf;

    static LogMelConfig hifigan();
    static LogMelConfig vocos();

    std::size_t n_bins() const { return n_fft / 2 + 1; }
    // Samples mirrored before (and after) the audio.
    std::size_t pad_left() const {
        return padding == MelPadding::Center ? n_fft / 2 : (n_fft - hop) / 2;
    }
    // Frames analyze() makes from `samples` samples (torch.stft's count): 1 + (samples +
    // 2 * pad_left() - n_fft) / hop, or 0 if the padded signal is shorter than n_fft.
    std::size_t frame_count(std::size_t samples) const;
    // Throws std::invalid_argument naming the field that is out of range.
    void validate() const;
};

// The analysis window of a config: n_fft values, a periodic Hann of win_length samples centred
// in zeros ((n_fft - win_length) / 2 before it, as torch.stft pads a shorter window).
std::vector<float> log_mel_window(const LogMelConfig& config);

class LogMelAnalyzer {
  public:
    // Validates the config and precomputes the filterbank, window and FFT plan.
    explicit LogMelAnalyzer(const LogMelConfig& config);

    const LogMelConfig& config() const { return config_; }
    const MelFilterbank& filterbank() const { return filterbank_; }
    // The analysis window, n_fft values (win_length periodic Hann samples centred in zeros).
    std::span<const float> window() const { return window_; }

    // The whole signal's log-mel spectrogram, (n_mels, frames) row-major: value (m, t) at
    // [m * frames + t]. *frames_out (if not null) receives frame_count(audio.size()). Throws
    // std::invalid_argument if the audio is too short for reflection padding (torch requires
    // more samples than pad_left(); here also at least one frame).
    std::vector<float> analyze(std::span<const float> audio, std::size_t* frames_out = nullptr);

    // One frame: `frame` holds the n_fft (already padded) samples under the window, `log_mel`
    // receives n_mels values. Allocation-free.
    void analyze_frame(std::span<const float> frame, std::span<float> log_mel);

  private:
    LogMelConfig config_;
    MelFilterbank filterbank_;
    std::vector<float> window_;
    RealFft fft_;
    std::vector<float> windowed_;
    std::vector<std::complex<float>> spectrum_;
    std::vector<float> magnitude_;
    std::vector<float> mel_;
};

}  // namespace etude::dsp
