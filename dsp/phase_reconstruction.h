// Weights-free vocoding: audio from log-mel frames by magnitude inversion and Real-Time Phase
// Gradient Heap Integration (RTPGHI: Průša, Balazs & Søndergaard, "A noniterative method for
// reconstruction of phase from STFT magnitude", IEEE/ACM TASLP 2017; Průša & Søndergaard,
// "Real-time spectrogram inversion using phase gradient heap integration", DAFx 2016; the same
// integration in Průša & Holighaus, "Phase vocoder done right", EUSIPCO 2017). The scheduler's
// last fallback tier: no model, a fixed small cost per frame, one frame of look-ahead.
//
// Ownership/threading: each object owns its matrices, FFT plan and buffers, all allocated in the
// constructor. After that, MelMagnitudeInverter::apply, RtpghiSynthesizer's and
// MelPhaseVocoder's push_frame/flush/reset never allocate or lock (real-time safe);
// MelPhaseVocoder::synthesize() allocates. They use per-object scratch state, so one object must
// not be used by two threads at once.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dsp/fft.h"
#include "dsp/log_mel.h"
#include "dsp/mel_filterbank.h"

namespace etude::dsp {

// Estimates the n_bins non-negative linear-frequency values whose mel projection is a given mel
// frame (B s = m for the filterbank B, s >= 0).
//
// Choice, in two steps:
// 1. The regularised pseudo-inverse P = B^T (B B^T + delta I)^-1, computed once in double and
//    applied as a matrix product, clamped at 0. Of all spectra projecting to m it is the one of
//    least energy, a piecewise-linear interpolation between band centres. The transposed
//    filterbank (B^T m, normalised) would be cheaper, but it smears every band over its
//    neighbours and flattens formants and harmonics, so re-analysis would not give m back.
//    delta (relative to the mean of diag(B B^T)) only matters for nearly identical bands (low
//    HTK bands narrower than an FFT bin) and empty ones (fmax above Nyquist).
// 2. A few multiplicative non-negative least-squares updates (Lee & Seung),
//    s <- s * (B^T m) / (B^T B s), started from step 1 raised to at least 1 % of its peak.
//    The clamp of step 1 breaks B s = m next to isolated peaks: the interpolation's negative
//    lobes are cut and the surviving hump leaks into bands that were silent. Each update keeps
//    s >= 0 and does not increase |B s - m|. For a sum of sines (tests/dsp), the mean log-mel
//    error of the estimate's own projection over bands within 60 dB of the peak drops from
//    0.21 / 0.31 nepers (HiFi-GAN / Vocos front end) after step 1 to 0.05 / 0.04 after 20
//    updates. B is sparse (a bin lies in at most a few triangles), so an update costs a few
//    thousand operations.
//
// Ownership/threading: apply() uses scratch buffers of the object: allocation-free and
// real-time safe, but one object must not be used by two threads at once.
class MelMagnitudeInverter {
  public:
    explicit MelMagnitudeInverter(const MelFilterbank& filterbank, double regularisation = 1e-4,
                                  std::size_t refine_iterations = 20);

    std::size_t n_mels() const { return n_mels_; }
    std::size_t n_bins() const { return n_bins_; }
    // P, n_bins x n_mels, row-major.
    std::span<const float> pseudo_inverse() const { return pinv_; }

    // mel: n_mels non-negative values; spectrum: n_bins values out.
    void apply(std::span<const float> mel, std::span<float> spectrum);

  private:
    std::size_t n_mels_;
    std::size_t n_bins_;
    std::size_t refine_iterations_;
    std::vector<float> pinv_;
    // Rows of P are negligible outside [pinv_first_[k], pinv_last_[k]).
    std::vector<std::size_t> pinv_first_;
    std::vector<std::size_t> pinv_last_;
    // B, n_mels x n_bins, nonzero only in [band_first_[m], band_last_[m]).
    std::vector<float> weights_;
    std::vector<std::size_t> band_first_;
    std::vector<std::size_t> band_last_;
    std::vector<float> bt_mel_;     // B^T m, n_bins
    std::vector<float> projected_;  // B s, n_mels
    std::vector<float> back_;       // B^T B s, n_bins
};

struct PhaseVocoderOptions {
    // Bins quieter than this fraction of their frame's loudest bin get random phase instead of
    // an integrated one: their gradients are dominated by estimation noise, and integrating
    // through them would spread that noise to the bins that matter.
    double relative_tolerance = 1e-4;
    // Seed of the random phases; reset() restarts the sequence, so output is reproducible.
    std::uint64_t seed = 0x5eed;
};

// Audio from a stream of STFT magnitude frames by RTPGHI with one frame of look-ahead.
//
// Alignment: frames are those of an STFT whose frame t covers samples [t * hop, t * hop + n_fft)
// of some signal x (StftStart::Immediate, stft_offline(center = false)). Every push_frame writes
// hop samples and flush writes n_fft more; output sample q (counted from the first push_frame
// after construction or reset()) reconstructs x[q - latency_samples()], latency_samples() ==
// hop, because frame t is only synthesised once frame t + 1 (the look-ahead) has arrived.
//
// Phase: with the Gaussian-equivalent window parameter lambda (for a Hann window of length L,
// hann_lambda(L) = 0.25645 * L^2, the value of Průša et al.), the phase derivatives follow from
// the log magnitude s:
//   time:      dphi/dn = 2 pi k / n_fft + (n_fft / lambda) ds/dk      [rad/sample, bin k]
//   frequency: dphi/dk = -(lambda / n_fft) ds/dn                      [rad/bin]
// ds/dk is a centred difference across the bins of one frame, ds/dn a centred difference of the
// previous and next frames (one-sided at the ends of the stream). Starting from the previous
// frame's phases, a max-heap on magnitude integrates them (trapezoidal rule) into the current
// frame, along time from the previous frame and along frequency within the current one, always
// from the loudest bin already known. These are the phases of an STFT referenced to each
// window's centre; the synthesis frame is shifted to the DFT's frame-start convention before
// the inverse FFT.
//
// Synthesis: inverse FFT, the analysis window again as synthesis window, overlap-add divided by
// the sum of squared windows of the frames actually present. (IstftStream divides by the
// steady-state sum, i.e. assumes silent frames before the first, which fades in the first
// n_fft - hop samples; a vocoder's frame 0 really covers the start of the audio, so the exact
// sum keeps the first samples at their level.) Positions covered by almost no window, the outer
// edges of the first and last frames, use a floored divisor instead of amplifying noise.
class RtpghiSynthesizer {
  public:
    // window: the analysis window of the magnitudes, n_fft values (copied). Throws
    // std::invalid_argument unless n_fft >= 2, 1 <= hop <= n_fft, window.size() == n_fft,
    // lambda > 0 and 0 < relative_tolerance < 1.
    RtpghiSynthesizer(std::size_t n_fft, std::size_t hop, std::span<const float> window,
                      double lambda, PhaseVocoderOptions options = {});

    static double hann_lambda(std::size_t win_length) {
        return 0.25645 * static_cast<double>(win_length) * static_cast<double>(win_length);
    }

    std::size_t n_fft() const { return n_fft_; }
    std::size_t hop() const { return hop_; }
    std::size_t bins() const { return n_fft_ / 2 + 1; }
    std::size_t latency_samples() const { return hop_; }
    std::size_t flush_samples() const { return n_fft_; }

    // magnitude: bins() non-negative finite values. Writes hop() samples to out_hop.
    void push_frame(std::span<const float> magnitude, std::span<float> out_hop);
    // Ends the stream: synthesises the last frame (without look-ahead) and writes the remaining
    // flush_samples() samples to `out`, then resets. With no frames pushed it writes zeros.
    void flush(std::span<float> out);
    // Back to the freshly constructed state (random phases restart from the seed).
    void reset();

  private:
    struct Slot {
        std::vector<float> magnitude;
        std::vector<float> log_mag;  // floored relative to the frame's peak
        std::vector<float> omega;    // time-direction phase derivative, rad/sample
        float peak = 0.0f;
    };
    struct HeapEntry {
        float magnitude;
        std::uint32_t bin;
        bool current;  // bin of the frame being built (else of the previous frame)
    };

    void prepare_slot(Slot& slot);
    // Builds frame `index` from its slot (and the previous/next ones if present), overlap-adds
    // it and writes hop() finished samples.
    void synthesise(std::size_t index, bool has_next, std::span<float> out_hop);
    void integrate_phase(const Slot* prev, const Slot& cur, const Slot* next);
    double random_phase();
    void emit(std::span<float> out, std::size_t count);

    std::size_t n_fft_;
    std::size_t hop_;
    std::size_t bins_;
    double lambda_;
    PhaseVocoderOptions options_;
    std::vector<float> window_;
    float norm_floor_;

    Slot slots_[3];                   // frames t - 1, t, t + 1 by index % 3
    std::vector<double> phase_;       // frame being built
    std::vector<double> prev_phase_;  // the frame before it
    std::vector<unsigned char> done_;
    std::vector<unsigned char> significant_;
    std::vector<unsigned char> prev_significant_;
    std::vector<float> fgrad_;  // frequency-direction phase derivative, rad/bin
    std::vector<HeapEntry> heap_;
    std::vector<std::complex<float>> spectrum_;
    std::vector<float> time_;
    std::vector<float> accum_;  // overlap-add of windowed frames, n_fft samples
    std::vector<float> norm_;   // overlap-add of squared windows, n_fft samples
    RealFft fft_;
    std::size_t pushed_ = 0;
    std::uint64_t rng_ = 0;
};

// Streams log-mel frames (as LogMelAnalyzer makes them with the same config) to audio:
// MelMagnitudeInverter, then RtpghiSynthesizer with the config's window.
//
// Alignment: every push_frame writes hop samples, flush writes flush_samples() more. Counting
// output samples from the first push_frame after construction or reset(), output sample q
// reconstructs sample q - latency_samples() of the audio the frames were analysed from, where
// latency_samples() = config.pad_left() + hop: the pad_left() samples by which frame 0 starts
// before audio sample 0 (n_fft / 2 for Center padding, (n_fft - hop) / 2 for ReflectHalf), plus
// the look-ahead hop. So N frames give N * hop + n_fft samples, and dropping the first
// latency_samples() leaves audio sample 0 onwards.
class MelPhaseVocoder {
  public:
    explicit MelPhaseVocoder(const LogMelConfig& config, PhaseVocoderOptions options = {});

    const LogMelConfig& config() const { return config_; }
    std::size_t n_mels() const { return config_.n_mels; }
    std::size_t hop() const { return config_.hop; }
    std::size_t latency_samples() const { return config_.pad_left() + config_.hop; }
    std::size_t flush_samples() const { return config_.n_fft; }

    // The linear magnitude estimate for one log-mel frame (n_mels values in, n_fft / 2 + 1
    // out), as push_frame uses it. Values at or below log(config.log_floor) (the analyser's
    // clamp, i.e. "quieter than the floor"), -inf and NaN mean zero; +inf and huge values are
    // clamped to a very loud finite level. Allocation-free.
    void estimate_magnitude(std::span<const float> log_mel, std::span<float> magnitude);

    // log_mel: one frame of n_mels natural-log values. Writes hop() samples to out_hop.
    void push_frame(std::span<const float> log_mel, std::span<float> out_hop);
    // Pushes `count` frames stored one after another (frame-major: frame j at
    // [j * n_mels, (j + 1) * n_mels)); writes count * hop() samples.
    void push_frames(std::span<const float> frames, std::size_t count, std::span<float> out);
    // Ends the stream: synthesises the last frame (without look-ahead) and writes the remaining
    // flush_samples() samples to `out`, then resets. With no frames pushed it writes zeros.
    void flush(std::span<float> out);
    // Back to the freshly constructed state (random phases restart from the seed).
    void reset();

    // The whole stream for a (n_mels, frames) row-major spectrogram as LogMelAnalyzer::analyze
    // returns it: frames * hop() + flush_samples() samples, identical to pushing every frame and
    // flushing. Resets first. Allocates.
    std::vector<float> synthesize(std::span<const float> log_mel, std::size_t frames);

  private:
    LogMelConfig config_;
    float silent_below_;  // log-mel values not above this are silence
    MelFilterbank filterbank_;
    MelMagnitudeInverter inverter_;
    RtpghiSynthesizer synthesizer_;
    std::vector<float> mel_;
    std::vector<float> magnitude_;
};

}  // namespace etude::dsp
