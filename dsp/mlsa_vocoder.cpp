#include "dsp/mlsa_vocoder.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace etude::dsp {
namespace {

// Fifth-order Pade approximation of exp() used by the MLSA filter; these are
// the published coefficients (Imai's MLSA filter, as used by SPTK and HTS).
constexpr int kPadeOrder = 5;
constexpr double kPade[kPadeOrder + 1] = {1.0,        0.4999391,    0.1107098,
                                          0.01369984, 0.0009564853, 0.00003041721};
// Coefficients kept by the reduced tier: the spectral envelope's coarse
// shape (formants smoothed), at roughly half the filtering cost.
constexpr std::size_t kReducedOrder = 12;
// How far the mixed-excitation history window slides before it is copied back.
constexpr std::size_t kHistorySlide = 1024;
// Length of the impulse response used to measure filter energy for the postfilter.
constexpr std::size_t kImpulseLength = 64;

}  // namespace

MlsaVocoder::MlsaVocoder(MlsaConfig config) : config_(std::move(config)) {
    if (config_.order < 2) throw std::invalid_argument("MLSA order must be at least 2");
    if (config_.frame_period == 0) throw std::invalid_argument("MLSA frame period must be > 0");
    if (!(std::abs(config_.alpha) < 1.0))
        throw std::invalid_argument("MLSA alpha must be in (-1, 1)");
    m_ = config_.order;  // coefficients 0..order-1 plus an implicit zero at index `order`
    active_m_ = m_;
    fir_len_ = config_.band_filters.empty() ? 0 : config_.band_filters.front().size();
    for (const auto& f : config_.band_filters)
        if (f.size() != fir_len_ || f.empty())
            throw std::invalid_argument(
                "mixed-excitation band filters must share one non-zero length");

    mc_.assign(m_ + 1, 0.0);
    b_.assign(m_ + 1, 0.0);
    b_next_.assign(m_ + 1, 0.0);
    b_step_.assign(m_ + 1, 0.0);
    d_first_.assign(2 * (kPadeOrder + 1), 0.0);
    d_second_.assign(kPadeOrder * (m_ + 2) + kPadeOrder + 1, 0.0);
    warped_.assign(2 * (m_ + 1), 0.0);
    unfiltered_.assign(m_ + 1, 0.0);
    freqt_.assign(4 * kImpulseLength, 0.0);
    impulse_.assign(2 * kImpulseLength, 0.0);
    weighted_.assign(2 * kImpulseLength, 0.0);
    pulse_shape_.assign(fir_len_, 0.0);
    noise_shape_.assign(fir_len_, 0.0);
    pulse_hist_.assign(fir_len_ + kHistorySlide, 0.0);
    noise_hist_.assign(fir_len_ + kHistorySlide, 0.0);
    hist_pos_ = kHistorySlide;
}

void MlsaVocoder::set_tier(MlsaTier tier) {
    active_m_ = tier == MlsaTier::Full ? m_ : std::min<std::size_t>(m_, kReducedOrder);
}

void MlsaVocoder::reset() {
    primed_ = false;
    period_ = phase_ = 0.0;
    hist_pos_ = kHistorySlide;
    for (auto* v : {&b_, &b_next_, &b_step_, &d_first_, &d_second_, &pulse_hist_, &noise_hist_})
        std::fill(v->begin(), v->end(), 0.0);
}

// Energies of the impulse responses of two filters, computed side by side.
// For each: the coefficients give back a mel-cepstrum, which is warped to a
// linear-frequency cepstrum (recursive all-pass transform, kImpulseLength
// terms), whose minimum-phase impulse response follows by the cepstral
// recursion. Both computations are long chains of dependent operations;
// running the two in one loop lets the CPU overlap them, while each keeps
// exactly the reference's operations and order.
void MlsaVocoder::filter_energies(std::span<const double> b1, std::span<const double> b2,
                                  double& e1, double& e2) {
    const double a = config_.alpha;
    constexpr std::size_t L = kImpulseLength;
    double* w1 = warped_.data();
    const std::size_t m = active_m_;
    double* w2 = warped_.data() + (m_ + 1);
    w1[m] = b1[m];
    w2[m] = b2[m];
    for (std::size_t k = m; k-- > 0;) {
        w1[k] = b1[k] + a * b1[k + 1];
        w2[k] = b2[k] + a * b2[k + 1];
    }

    const double wa = -a, wb = 1.0 - a * a;
    // Layout: [cur1 | cur2 | prev1 | prev2], each L long; swapped, not copied.
    double* cur1 = freqt_.data();
    double* cur2 = cur1 + L;
    double* prev1 = cur1 + 2 * L;
    double* prev2 = cur1 + 3 * L;
    std::fill(freqt_.begin(), freqt_.end(), 0.0);
    for (std::size_t i = m + 1; i-- > 0;) {
        std::swap(cur1, prev1);
        std::swap(cur2, prev2);
        cur1[0] = w1[i] + wa * prev1[0];
        cur2[0] = w2[i] + wa * prev2[0];
        cur1[1] = wb * prev1[0] + wa * prev1[1];
        cur2[1] = wb * prev2[0] + wa * prev2[1];
        for (std::size_t j = 2; j < L; ++j) {
            cur1[j] = prev1[j - 1] + wa * (prev1[j] - cur1[j - 1]);
            cur2[j] = prev2[j - 1] + wa * (prev2[j] - cur2[j - 1]);
        }
    }

    // k * c[k] is formed once per k; products and sums keep the reference's order.
    double* k1 = weighted_.data();
    double* k2 = k1 + L;
    for (std::size_t k = 1; k < L; ++k) {
        k1[k] = static_cast<double>(k) * cur1[k];
        k2[k] = static_cast<double>(k) * cur2[k];
    }
    double* h1 = impulse_.data();
    double* h2 = h1 + L;
    h1[0] = std::exp(cur1[0]);
    h2[0] = std::exp(cur2[0]);
    for (std::size_t n = 1; n < L; ++n) {
        double acc1 = 0.0, acc2 = 0.0;
        for (std::size_t k = 1; k <= n; ++k) {
            acc1 += k1[k] * h1[n - k];
            acc2 += k2[k] * h2[n - k];
        }
        h1[n] = acc1 / static_cast<double>(n);
        h2[n] = acc2 / static_cast<double>(n);
    }
    e1 = e2 = 0.0;
    for (std::size_t n = 0; n < L; ++n) {
        e1 += h1[n] * h1[n];
        e2 += h2[n] * h2[n];
    }
}

void MlsaVocoder::to_filter_coefficients(std::span<const float> mcep, std::span<double> b) {
    const double a = config_.alpha;
    // A reduced tier keeps only the first active_m_ coefficients.
    for (std::size_t k = 0; k < m_; ++k) mc_[k] = k < active_m_ ? mcep[k] : 0.0f;
    mc_[m_] = 0.0;
    b[m_] = mc_[m_];
    for (std::size_t k = m_; k-- > 0;) b[k] = mc_[k] - a * b[k + 1];

    if (config_.beta > 0.0 && m_ > 1) {
        // Postfilter: emphasise the higher cepstral terms, then restore the
        // original energy through c0. The b1 correction uses mc[2], as the
        // reference vocoder does.
        std::copy(b.begin(), b.begin() + static_cast<long>(m_ + 1), unfiltered_.begin());
        b[1] -= config_.beta * a * mc_[2];
        for (std::size_t k = 2; k <= m_; ++k) b[k] *= 1.0 + config_.beta;
        double before, after;
        filter_energies(unfiltered_, b, before, after);
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

    // Stage 2: exp(sum_{k>=2} b_k z~^-k), each Pade term an all-pass FIR
    // chain fed with the previous sample's output of the term before it. The
    // five chains are independent within a sample, so they run interleaved
    // (delay lines stored k-major: line[k * kPadeOrder + stage]) and the CPU
    // overlaps their serial dependencies. Each chain's arithmetic, and the
    // order of the final sums, are those of the reference filter.
    double* line = d_second_.data();
    double* pt2 = line + kPadeOrder * (m_ + 2);  // stage inputs/outputs, kPadeOrder+1
    double y[kPadeOrder] = {};
    for (int s = 0; s < kPadeOrder; ++s) {
        line[s] = pt2[s];
        line[kPadeOrder + s] = aa * line[s] + a * line[kPadeOrder + s];
    }
    const std::size_t m = active_m_;
    for (std::size_t k = 2; k <= m; ++k) {
        double* row = line + k * kPadeOrder;
        const double bk = b[k];
        for (int s = 0; s < kPadeOrder; ++s) {
            row[s] += a * (row[s + kPadeOrder] - row[s - kPadeOrder]);
            y[s] += row[s] * bk;
        }
    }
    // Shift every line by one position (k = m+1 .. 2 take k-1).
    std::memmove(line + 2 * kPadeOrder, line + kPadeOrder, sizeof(double) * kPadeOrder * m);
    out = 0.0;
    for (int i = kPadeOrder; i >= 1; --i) {
        pt2[i] = y[i - 1];
        const double v = y[i - 1] * kPade[i];
        x += (i & 1) ? v : -v;
        out += v;
    }
    pt2[0] = x;
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
            // its waveform. Sums run in the reference's order so rounding
            // matches too. The history is a window sliding down a longer
            // buffer (hist[k] = buffer[pos + k]), so a step moves one index
            // instead of shifting the whole line.
            const double* ph = pulse_hist_.data() + hist_pos_;
            const double* nh = noise_hist_.data() + hist_pos_;
            double fp = 0.0, fn = 0.0;
            for (std::size_t k = fir_len_ - 1; k > 0; --k) {
                fp += pulse_shape_[k] * ph[k];
                fn += noise_shape_[k] * nh[k];
            }
            fp += pulse_shape_[0] * pulse;
            fn += noise_shape_[0] * hiss;
            if (hist_pos_ == 0) {
                std::copy_n(pulse_hist_.data(), fir_len_, pulse_hist_.data() + kHistorySlide);
                std::copy_n(noise_hist_.data(), fir_len_, noise_hist_.data() + kHistorySlide);
                hist_pos_ = kHistorySlide;
            }
            --hist_pos_;
            pulse_hist_[hist_pos_] = pulse;
            noise_hist_[hist_pos_] = hiss;
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
