// Mel-cepstral vocoder: pulse/noise mixed excitation through an MLSA filter.
//
// This reproduces the synthesis that Flite's clustergen voices use (HTS's
// vocoder as carried into Flite): per-sample linear interpolation of the
// filter coefficients and of the pitch period between consecutive 5 ms frames,
// a Pade-approximated MLSA filter, a postfilter that sharpens formants
// (beta) while keeping frame energy, and multi-band mixed excitation where
// each band's voicing strength blends a pulse train with noise.
//
// Ownership/threads: one MlsaVocoder per stream, used by one thread at a time.
// The constructor allocates; reset() and synthesize_frame() never allocate,
// lock or perform I/O, so they may run on a real-time worker.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace etude::dsp {

struct MlsaConfig {
    double sample_rate = 16000.0;
    std::size_t frame_period = 80;  // samples per parameter frame (5 ms at 16 kHz)
    std::size_t order = 25;         // number of mel-cepstral coefficients c0..c(order-1)
    double alpha = 0.42;            // frequency-warping factor of the mel-cepstrum
    double beta = 0.4;              // postfilter strength; 0 disables it
    double gain = 1.5;              // excitation gain applied with exp(c0)
    // Mixed excitation: one FIR band filter per voicing band (all the same
    // length). Empty means plain excitation: pulses when voiced, noise otherwise.
    std::vector<std::vector<double>> band_filters;
};

// Quality tiers. Full reproduces the reference exactly; Reduced filters with
// only the first 12 mel-cepstral coefficients (a smoother envelope, about
// half the cost) for when a block must be made in less time.
enum class MlsaTier { Full, Reduced };

// Copyable: a copy is a snapshot of the whole synthesis state, so a block of
// frames can be vocoded on another thread from the same starting point.
// Copy-assigning between vocoders of the same configuration does not allocate.
class MlsaVocoder {
  public:
    explicit MlsaVocoder(MlsaConfig config);

    const MlsaConfig& config() const { return config_; }
    std::size_t bands() const { return config_.band_filters.size(); }

    // Forgets all filter, pitch and excitation state: the next frame primes again.
    void reset();
    // Applies from the next frame on. Switching keeps the state.
    void set_tier(MlsaTier tier);
    MlsaTier tier() const { return active_m_ == m_ ? MlsaTier::Full : MlsaTier::Reduced; }

    // Consumes one parameter frame. The filter interpolates from the previous
    // frame to this one, so the very first frame after construction or reset()
    // only primes the state and yields 0 samples; every later frame yields
    // frame_period samples into `out`, in 16-bit sample units (as Flite's
    // waveform), and returns how many it wrote.
    //   f0_hz     fundamental frequency, 0 for unvoiced
    //   mcep      `order` mel-cepstral coefficients
    //   strengths `bands()` voicing strengths in 0..1 (ignored without bands)
    //   noise     frame_period excitation noise values, one used per sample
    //             (Flite draws +-1 from rand(); the engine passes its own)
    std::size_t synthesize_frame(double f0_hz, std::span<const float> mcep,
                                 std::span<const float> strengths, std::span<const float> noise,
                                 std::span<double> out);

  private:
    void to_filter_coefficients(std::span<const float> mcep, std::span<double> b);
    void filter_energies(std::span<const double> b1, std::span<const double> b2, double& e1,
                         double& e2);
    double mlsa_filter(double x);

    MlsaConfig config_;
    std::size_t m_;         // filter order: `order` coefficients plus a zero top term
    std::size_t active_m_;  // order used by the current tier (<= m_)
    std::size_t fir_len_;   // mixed-excitation band filter length

    // Interpolation state between frames.
    bool primed_ = false;
    double period_ = 0.0;         // current pitch period in samples (0 = unvoiced)
    double phase_ = 0.0;          // samples since the last pulse
    std::vector<double> mc_;      // scratch: mel-cepstrum of the current frame, m_+1
    std::vector<double> b_;       // filter coefficients in use, m_+1
    std::vector<double> b_next_;  // coefficients at the end of this frame
    std::vector<double> b_step_;  // per-sample increment

    // Pade-approximated MLSA filter delay lines.
    std::vector<double> d_first_;   // first stage (b1 only): 2*(pade+1)
    std::vector<double> d_second_;  // second stage: pade*(m_+2) + pade+1

    // Postfilter energy scratch (two filters side by side).
    std::vector<double> unfiltered_;  // coefficients before the postfilter, m_+1
    std::vector<double> warped_;      // 2 x (m_+1)
    std::vector<double> freqt_;       // 4 x impulse length
    std::vector<double> impulse_;     // 2 x impulse length
    std::vector<double> weighted_;    // 2 x impulse length: k * cepstrum[k]

    // Mixed excitation.
    std::vector<double> pulse_shape_;
    std::vector<double> noise_shape_;
    std::vector<double> pulse_hist_;
    std::vector<double> noise_hist_;
    std::size_t hist_pos_ = 0;  // start of the live window in the two histories
};

}  // namespace etude::dsp
