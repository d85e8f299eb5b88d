#include "dsp/mlsa_vocoder.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace etude::dsp {
namespace {

// Fifth-order Pade approximation of exp() used by the MLSA filter; these are
// the published coefficients (Imai's MLSA filter, as used by SPTK and HTS).
constexpr int kPadeOrder = 5;
constexpr double kPade[kPadeOrder + 1] = {1.0,         0.4999391,    0.1107098,
                                          0.01369984,  0.0009564853, 0.00003041721};
// Length of the impulse response used to measure filter energy for the postfilter.
constexpr std::size_t kImpulseLength = 64;

}  // namespace

MlsaVocoder::MlsaVocoder(MlsaConfig config) : config_(std::move(config)) {
    if (config_.order < 2) throw std::invalid_argument("MLSA order must be at least 2");
    if (config_.frame_period == 0) throw std::invalid_argument("MLSA frame period must be > 0");
    if (!(std::abs(config_.alpha) < 1.0)) throw std::invalid_argument("MLSA alpha must be in (-1, 1)");
    m_ = config_.order;  // coefficients 0..order-1 plus an implicit zero at index `order`
    fir_len_ = config_.band_filters.empty() ? 0 : config_.band_filters.front().size();
    for (const auto& f : config_.band_filters)
        if (f.size() != fir_len_ || f.empty())
            throw std::invalid_argument("mixed-excitation band filters must share one non-zero length");

    mc_.assign(m_ + 1, 0.0);
    b_.assign(m_ + 1, 0.0);
    b_next_.assign(m_ + 1, 0.0);
    b_step_.assign(m_ + 1, 0.0);
    d_first_.assign(2 * (kPadeOrder + 1), 0.0);
    d_second_.assign(kPadeOrder * (m_ + 2) + kPadeOrder + 1, 0.0);
    warped_.assign(m_ + 1, 0.0);
    freqt_prev_.assign(kImpulseLength, 0.0);
    freqt_cur_.assign(kImpulseLength, 0.0);
    impulse_.assign(kImpulseLength, 0.0);
    pulse_shape_.assign(fir_len_, 0.0);
    noise_shape_.assign(fir_len_, 0.0);
    pulse_hist_.assign(fir_len_, 0.0);
    noise_hist_.assign(fir_len_, 0.0);
}

void MlsaVocoder::reset() {
    primed_ = false;
    period_ = phase_ = 0.0;
    for (auto* v : {&b_, &b_next_, &b_step_, &d_first_, &d_second_, &pulse_hist_, &noise_hist_})
        std::fill(v->begin(), v->end(), 0.0);
}

// Energy of the filter's impulse response: the mel-cepstrum (recovered from
// the coefficients) is warped back to a linear-frequency cepstrum, whose
// minimum-phase impulse response follows by the usual recursion.
double MlsaVocoder::filter_energy(std::span<const double> b) {
    const double a = config_.alpha;
    // coefficients -> mel-cepstrum
    warped_[m_] = b[m_];
    for (std::size_t k = m_; k-- > 0;) warped_[k] = b[k] + a * b[k + 1];

    // Frequency transform with -alpha (recursive all-pass warping), to kImpulseLength-1 terms.
    const double wa = -a, wb = 1.0 - a * a;
    std::fill(freqt_cur_.begin(), freqt_cur_.end(), 0.0);
    for (std::size_t i = m_ + 1; i-- > 0;) {
        std::copy(freqt_cur_.begin(), freqt_cur_.end(), freqt_prev_.begin());
        freqt_cur_[0] = warped_[i] + wa * freqt_prev_[0];
        freqt_cur_[1] = wb * freqt_prev_[0] + wa * freqt_prev_[1];
        for (std::size_t j = 2; j < kImpulseLength; ++j)
            freqt_cur_[j] = freqt_prev_[j - 1] + wa * (freqt_prev_[j] - freqt_cur_[j - 1]);
    }

    // Minimum-phase impulse response from the cepstrum.
    impulse_[0] = std::exp(freqt_cur_[0]);
    for (std::size_t n = 1; n < kImpulseLength; ++n) {
        double acc = 0.0;
        for (std::size_t k = 1; k <= n; ++k)
            acc += static_cast<double>(k) * freqt_cur_[k] * impulse_[n - k];
        impulse_[n] = acc / static_cast<double>(n);
    }
    double energy = 0.0;
    for (double h : impulse_) energy += h * h;
    return energy;
}

void MlsaVocoder::to_filter_coefficients(std::span<const float> mcep, std::span<double> b) {
    const double a = config_.alpha;
    for (std::size_t k = 0; k < m_; ++k) mc_[k] = mcep[k];
    mc_[m_] = 0.0;
    b[m_] = mc_[m_];
    for (std::size_t k = m_; k-- > 0;) b[k] = mc_[k] - a * b[k + 1];

    if (config_.beta > 0.0 && m_ > 1) {
        // Postfilter: emphasise the higher cepstral terms, then restore the
        // original energy through c0. The b1 correction uses mc[2], as the
        // reference vocoder does.
        const double before = filter_energy(b);
        b[1] -= config_.beta * a * mc_[2];
        for (std::size_t k = 2; k <= m_; ++k) b[k] *= 1.0 + config_.beta;
        const double after = filter_energy(b);
        b[0] += std::log(before / after) / 2.0;
    }
}

double MlsaVocoder::mlsa_filter(double x) {
    const double a = config_.alpha, aa = 1.0 - a * a;
    const double* b = b_.data();

    // Stage 1: exp(b1 * z~^-1) through the Pade approximant.
    double* d = d_first_.data();
    double* pt = d + kPadeOrder + 1;
    double out = 0.0;
    for (int i = kPadeOrder; i >= 1; --i) {
        d[i] = aa * pt[i - 1] + a * d[i];
        pt[i] = d[i] * b[1];
        const double v = pt[i] * kPade[i];
        x += (i & 1) ? v : -v;
        out += v;
    }
    pt[0] = x;
    x = out + x;

    // Stage 2: exp(sum_{k>=2} b_k z~^-k), each Pade term an all-pass FIR chain.
    d = d_second_.data();
    pt = d + kPadeOrder * (m_ + 2);
    out = 0.0;
    for (int i = kPadeOrder; i >= 1; --i) {
        double* dl = d + (i - 1) * (m_ + 2);
        dl[0] = pt[i - 1];
        dl[1] = aa * dl[0] + a * dl[1];
        double y = 0.0;
        for (std::size_t k = 2; k <= m_; ++k) {
            dl[k] += a * (dl[k + 1] - dl[k - 1]);
            y += dl[k] * b[k];
        }
        for (std::size_t k = m_ + 1; k > 1; --k) dl[k] = dl[k - 1];
        pt[i] = y;
        const double v = y * kPade[i];
        x += (i & 1) ? v : -v;
        out += v;
    }
    pt[0] = x;
    return out + x;
}

std::size_t MlsaVocoder::synthesize_frame(double f0_hz, std::span<const float> mcep,
                                          std::span<const float> strengths,
                                          std::span<const float> noise, std::span<double> out) {
    assert(mcep.size() >= m_);
    const bool mixed = fir_len_ > 0;
    const double period = f0_hz != 0.0 ? config_.sample_rate / f0_hz : 0.0;

    if (mixed) {
        // This frame's pulse and noise shaping filters: each band filter
        // weighted by its voicing strength (pulse) or its complement (noise).
        std::fill(pulse_shape_.begin(), pulse_shape_.end(), 0.0);
        std::fill(noise_shape_.begin(), noise_shape_.end(), 0.0);
        for (std::size_t band = 0; band < config_.band_filters.size(); ++band) {
            const double s = strengths[band];
            const auto& h = config_.band_filters[band];
            for (std::size_t k = 0; k < fir_len_; ++k) {
                pulse_shape_[k] += s * h[k];
                noise_shape_[k] += (1.0 - s) * h[k];
            }
        }
    }

    if (!primed_) {
        primed_ = true;
        period_ = phase_ = period;
        to_filter_coefficients(mcep, b_);
        return 0;
    }

    const std::size_t n = config_.frame_period;
    assert(out.size() >= n && noise.size() >= n);
    to_filter_coefficients(mcep, b_next_);
    for (std::size_t k = 0; k <= m_; ++k)
        b_step_[k] = (b_next_[k] - b_[k]) / static_cast<double>(n);

    // The pitch period glides between voiced frames; a voicing change jumps.
    double period_step = 0.0;
    if (period_ != 0.0 && period != 0.0) {
        period_step = (period - period_) / static_cast<double>(n);
    } else {
        phase_ = period;
        period_ = 0.0;
    }

    for (std::size_t j = 0; j < n; ++j) {
        double x, pulse = 0.0, hiss = 0.0;
        if (period_ == 0.0) {
            x = noise[j];
            hiss = x;
        } else {
            phase_ += 1.0;
            if (phase_ >= period_) {
                x = std::sqrt(period_);
                phase_ -= period_;
            } else {
                x = 0.0;
            }
            pulse = x;
            hiss = noise[j];
        }

        if (mixed) {
            // Shaping FIRs. Tap 0 takes the current input and tap k >= 1 the
            // input from k+1 samples back: the reference implementation's
            // delay line skips one sample and we must match it to reproduce
            // its waveform.
            // Sums run in the reference's order so rounding matches too.
            double fp = 0.0, fn = 0.0;
            for (std::size_t k = fir_len_ - 1; k > 0; --k) {
                fp += pulse_shape_[k] * pulse_hist_[k];
                fn += noise_shape_[k] * noise_hist_[k];
                pulse_hist_[k] = pulse_hist_[k - 1];
                noise_hist_[k] = noise_hist_[k - 1];
            }
            fp += pulse_shape_[0] * pulse;
            fn += noise_shape_[0] * hiss;
            pulse_hist_[0] = pulse;
            noise_hist_[0] = hiss;
            x = fp + fn;
        }

        const double gain = config_.sample_rate == 8000.0 ? 2.0 : config_.gain;
        x *= std::exp(b_[0]) * gain;
        out[j] = mlsa_filter(x);

        period_ += period_step;
        for (std::size_t k = 0; k <= m_; ++k) b_[k] += b_step_[k];
    }

    period_ = period;
    std::copy(b_next_.begin(), b_next_.end(), b_.begin());
    return n;
}

}  // namespace etude::dsp
