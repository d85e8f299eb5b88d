// Mel scale conversions and a triangular mel filterbank.
//
// Conventions (the filterbank builder is the one librosa and torchaudio share; only the scale
// and the normalisation differ):
//   MelScale::Slaney + MelNorm::Slaney reproduces librosa.filters.mel(htk=False,
//     norm='slaney'), librosa's default: linear below 1 kHz at 200/3 Hz per mel, logarithmic
//     above with a step of log(6.4)/27 per mel; each filter is scaled by
//     2 / (hz[i+2] - hz[i]) so that all have the same area.
//   MelScale::Htk + MelNorm::None reproduces torchaudio.functional.melscale_fbanks(
//     norm=None, mel_scale='htk'), torchaudio's default (and librosa with htk=True,
//     norm=None): mel = 2595 log10(1 + hz / 700), peak weight 1.
// In both, mel points are equally spaced between mel(fmin) and mel(fmax) (n_mels + 2 of
// them), and bin k's frequency is k * (sr / 2) / (n_fft / 2), librosa's
// linspace(0, sr/2, 1 + n_fft//2). Weights are computed in double and stored as float.
//
// Ownership/threading: MelFilterbank owns its weights (allocated in the constructor); apply()
// is const, allocation-free and real-time safe, and may be called from several threads.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace etude::dsp {

enum class MelScale { Slaney, Htk };
enum class MelNorm { None, Slaney };

double hz_to_mel(double hz, MelScale scale);
double mel_to_hz(double mel, MelScale scale);

class MelFilterbank {
  public:
    // Throws std::invalid_argument unless sample_rate > 0, n_fft >= 2, n_mels >= 1 and
    // 0 <= fmin < fmax. fmax above sample_rate / 2 is allowed (as in librosa); the top
    // filters are then partly or wholly empty.
    MelFilterbank(double sample_rate, std::size_t n_fft, std::size_t n_mels, double fmin,
                  double fmax, MelScale scale = MelScale::Slaney, MelNorm norm = MelNorm::Slaney);

    std::size_t n_mels() const { return n_mels_; }
    std::size_t n_bins() const { return n_bins_; }
    // n_mels() x n_bins(), row-major: weights()[m * n_bins() + k] weighs bin k into mel m.
    std::span<const float> weights() const { return weights_; }

    // mel_out[m] = sum_k weights[m][k] * spectrum[k]; spectrum has n_bins() values (magnitude
    // or power, as the caller chooses), mel_out n_mels().
    void apply(std::span<const float> spectrum, std::span<float> mel_out) const;

  private:
    std::size_t n_mels_;
    std::size_t n_bins_;
    std::vector<float> weights_;
    // Each triangle covers few bins; apply() visits only [first_[m], last_[m]).
    std::vector<std::size_t> first_;
    std::vector<std::size_t> last_;
};

}  // namespace etude::dsp
