// Mel-cepstrum to spectral envelope.
//
// A mel-cepstrum c_0..c_M with warping factor alpha describes the log
// amplitude response  log|H(w)| = sum_m c_m cos(m * beta(w)),  where
// beta(w) = w + 2 atan(alpha sin w / (1 - alpha cos w)) is the phase of the
// first-order all-pass that maps linear to mel-like frequency. The class
// tabulates cos(m * beta(w_k)) for the n_fft/2+1 FFT bin frequencies once, so
// each frame costs one small matrix-vector product.
//
// Threads: construct off the real-time path; the const methods are
// allocation-free and may be shared by threads.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace etude::dsp {

class MelCepstrumEnvelope {
  public:
    MelCepstrumEnvelope(std::size_t n_coefficients, double alpha, std::size_t n_fft);

    std::size_t n_coefficients() const { return n_coeffs_; }
    std::size_t n_bins() const { return n_bins_; }
    double alpha() const { return alpha_; }
    // The tabulated cos(m * beta(w_k)): n_bins rows of n_coefficients, row-major.
    const std::vector<float>& basis() const { return basis_; }

    // Natural-log amplitude per bin (0..n_fft/2).
    void log_amplitude(std::span<const float> mcep, std::span<float> out) const;
    // Linear amplitude per bin: exp of the above.
    void amplitude(std::span<const float> mcep, std::span<float> out) const;

  private:
    std::size_t n_coeffs_, n_bins_;
    double alpha_;
    std::vector<float> basis_;  // n_bins x n_coeffs, row-major
};

// Frequency warping of a cepstrum by a first-order all-pass (the recursive
// "freqt" transform), producing out.size() coefficients. Passing alpha = -a
// turns a mel-cepstrum of warping a into a plain linear-frequency cepstrum.
// Allocates scratch; not for the real-time path.
void warp_cepstrum(std::span<const double> in, double alpha, std::span<double> out);

}  // namespace etude::dsp
