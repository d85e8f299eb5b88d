#include "dsp/phase_reconstruction.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace etude::dsp {

namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;
// Log-mel values above this are clamped: e^30 is already ~10^13 times a full-scale sine's mel
// magnitude, and larger ones would overflow the float products to inf.
constexpr float kMaxLogMel = 30.0f;
// Log magnitude given to bins of an all-zero frame (any constant: only differences count).
constexpr float kSilentLogMagnitude = -100.0f;

// In-place Cholesky factorisation of a symmetric positive definite n x n matrix (row-major,
// lower triangle used and overwritten with L). Returns false if it is not positive definite.
bool cholesky(std::vector<double>& a, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
        double d = a[j * n + j];
        for (std::size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0)) return false;
        const double l = std::sqrt(d);
        a[j * n + j] = l;
        for (std::size_t i = j + 1; i < n; ++i) {
            double s = a[i * n + j];
            for (std::size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / l;
        }
    }
    return true;
}

// Solves L L^T x = b in place, L from cholesky().
void cholesky_solve(const std::vector<double>& l, std::size_t n, std::vector<double>& b) {
    for (std::size_t i = 0; i < n; ++i) {
        double s = b[i];
        for (std::size_t k = 0; k < i; ++k) s -= l[i * n + k] * b[k];
        b[i] = s / l[i * n + i];
    }
    for (std::size_t i = n; i-- > 0;) {
        double s = b[i];
        for (std::size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * b[k];
        b[i] = s / l[i * n + i];
    }
}

// Validates RtpghiSynthesizer's arguments before any member is built from them.
void checked_geometry(std::size_t n_fft, std::size_t hop, std::size_t window_size, double lambda,
                      const PhaseVocoderOptions& options) {
    const auto bad = [](const std::string& what) {
        throw std::invalid_argument("RtpghiSynthesizer: " + what);
    };
    if (n_fft < 2) bad("n_fft must be >= 2");
    if (hop < 1 || hop > n_fft) bad("hop must be in [1, n_fft], got " + std::to_string(hop));
    if (window_size != n_fft) bad("window must have n_fft values");
    if (!(lambda > 0.0)) bad("lambda must be > 0");
    if (!(options.relative_tolerance > 0.0 && options.relative_tolerance < 1.0)) {
        bad("relative_tolerance must be in (0, 1)");
    }
}

const LogMelConfig& validated(const LogMelConfig& config) {
    config.validate();
    return config;
}

}  // namespace

MelMagnitudeInverter::MelMagnitudeInverter(const MelFilterbank& filterbank, double regularisation,
                                           std::size_t refine_iterations)
    : n_mels_(filterbank.n_mels()),
      n_bins_(filterbank.n_bins()),
      refine_iterations_(refine_iterations),
      weights_(filterbank.weights().begin(), filterbank.weights().end()),
      band_first_(n_mels_, 0),
      band_last_(n_mels_, 0),
      bt_mel_(n_bins_, 0.0f),
      projected_(n_mels_, 0.0f),
      back_(n_bins_, 0.0f) {
    if (!(regularisation > 0.0)) {
        throw std::invalid_argument("MelMagnitudeInverter: regularisation must be > 0");
    }
    const std::span<const float> b = weights_;
    const std::size_t m = n_mels_, k_bins = n_bins_;
    for (std::size_t i = 0; i < m; ++i) {
        std::size_t first = k_bins, last = 0;
        for (std::size_t k = 0; k < k_bins; ++k) {
            if (b[i * k_bins + k] != 0.0f) {
                first = std::min(first, k);
                last = k + 1;
            }
        }
        if (first < last) {
            band_first_[i] = first;
            band_last_[i] = last;
        }
    }

    // Gram matrix B B^T in double; the triangles overlap only their neighbours, so it is
    // nearly tridiagonal, but nothing below relies on that.
    std::vector<double> gram(m * m, 0.0);
    for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j <= i; ++j) {
            double s = 0.0;
            for (std::size_t k = 0; k < k_bins; ++k) {
                s +=
                    static_cast<double>(b[i * k_bins + k]) * static_cast<double>(b[j * k_bins + k]);
            }
            gram[i * m + j] = gram[j * m + i] = s;
        }
    }
    double trace = 0.0;
    for (std::size_t i = 0; i < m; ++i) trace += gram[i * m + i];
    pinv_.assign(k_bins * m, 0.0f);
    pinv_first_.assign(k_bins, 0);
    pinv_last_.assign(k_bins, 0);
    if (!(trace > 0.0)) return;  // every band empty: the estimate is all zeros
    // Relative to the mean band energy, so Slaney-normalised (tiny weights) and unnormalised
    // filterbanks are regularised alike.
    const double delta = regularisation * trace / static_cast<double>(m);
    for (std::size_t i = 0; i < m; ++i) gram[i * m + i] += delta;
    if (!cholesky(gram, m)) {
        throw std::runtime_error("MelMagnitudeInverter: regularised Gram matrix is singular");
    }

    // Row k of P = B^T (B B^T + delta I)^-1 is the solution of (B B^T + delta I) x = B[:, k].
    std::vector<double> x(m);
    for (std::size_t k = 0; k < k_bins; ++k) {
        bool any = false;
        for (std::size_t i = 0; i < m; ++i) {
            x[i] = b[i * k_bins + k];
            any = any || x[i] != 0.0;
        }
        if (!any) continue;  // a bin no band covers (above fmax) stays 0
        cholesky_solve(gram, m, x);
        double largest = 0.0;
        for (double v : x) largest = std::max(largest, std::abs(v));
        // The inverse of a banded matrix decays fast away from the band; entries below 1e-7 of
        // the row's largest change the estimate by less than float rounding, so they are cut
        // to keep apply() short.
        std::size_t first = m, last = 0;
        for (std::size_t i = 0; i < m; ++i) {
            if (std::abs(x[i]) > largest * 1e-7) {
                first = std::min(first, i);
                last = i + 1;
            }
        }
        for (std::size_t i = first; i < last; ++i) pinv_[k * m + i] = static_cast<float>(x[i]);
        if (first < last) {
            pinv_first_[k] = first;
            pinv_last_[k] = last;
        }
    }
}

void MelMagnitudeInverter::apply(std::span<const float> mel, std::span<float> spectrum) {
    assert(mel.size() == n_mels_ && spectrum.size() == n_bins_);
    float peak = 0.0f;
    for (std::size_t k = 0; k < n_bins_; ++k) {
        const float* row = pinv_.data() + k * n_mels_;
        float s = 0.0f;
        for (std::size_t i = pinv_first_[k]; i < pinv_last_[k]; ++i) s += row[i] * mel[i];
        spectrum[k] = std::max(s, 0.0f);
        peak = std::max(peak, spectrum[k]);
    }
    if (refine_iterations_ == 0 || !(peak > 0.0f)) return;

    // Multiplicative updates cannot revive a zero, so every bin starts at 1 % of the peak or
    // more; bins that no band with energy covers fall back to 0 in the first update.
    for (float& s : spectrum) s = std::max(s, 0.01f * peak);
    const auto transpose_times = [&](std::span<const float> per_band, std::span<float> per_bin) {
        std::fill(per_bin.begin(), per_bin.end(), 0.0f);
        for (std::size_t i = 0; i < n_mels_; ++i) {
            const float* row = weights_.data() + i * n_bins_;
            for (std::size_t k = band_first_[i]; k < band_last_[i]; ++k) {
                per_bin[k] += row[k] * per_band[i];
            }
        }
    };
    transpose_times(mel, bt_mel_);
    for (std::size_t it = 0; it < refine_iterations_; ++it) {
        for (std::size_t i = 0; i < n_mels_; ++i) {
            const float* row = weights_.data() + i * n_bins_;
            float s = 0.0f;
            for (std::size_t k = band_first_[i]; k < band_last_[i]; ++k) s += row[k] * spectrum[k];
            projected_[i] = s;
        }
        transpose_times(projected_, back_);
        for (std::size_t k = 0; k < n_bins_; ++k) {
            spectrum[k] = back_[k] > 0.0f ? spectrum[k] * (bt_mel_[k] / back_[k]) : 0.0f;
        }
    }
}

RtpghiSynthesizer::RtpghiSynthesizer(std::size_t n_fft, std::size_t hop,
                                     std::span<const float> window, double lambda,
                                     PhaseVocoderOptions options)
    : n_fft_(n_fft),
      hop_(hop),
      bins_(n_fft / 2 + 1),
      lambda_(lambda),
      options_(options),
      window_(window.begin(), window.end()),
      fft_((checked_geometry(n_fft, hop, window.size(), lambda, options), n_fft)) {
    // Steady-state sums of squared windows per position mod hop; the divisor floor is a tenth
    // of the largest, but never above the smallest nonzero one, so steady-state positions are
    // always divided exactly.
    std::vector<double> sums(hop, 0.0);
    for (std::size_t i = 0; i < n_fft; ++i) sums[i % hop] += double(window_[i]) * window_[i];
    const double largest = *std::max_element(sums.begin(), sums.end());
    double floor = 0.1 * largest;
    for (double s : sums) {
        if (s > 0.0) floor = std::min(floor, s);
    }
    norm_floor_ = static_cast<float>(floor > 0.0 ? floor : 1.0);

    for (Slot& slot : slots_) {
        slot.magnitude.assign(bins_, 0.0f);
        slot.log_mag.assign(bins_, 0.0f);
        slot.omega.assign(bins_, 0.0f);
    }
    phase_.assign(bins_, 0.0);
    prev_phase_.assign(bins_, 0.0);
    done_.assign(bins_, 0);
    significant_.assign(bins_, 0);
    prev_significant_.assign(bins_, 0);
    fgrad_.assign(bins_, 0.0f);
    heap_.assign(2 * bins_, HeapEntry{});
    spectrum_.assign(bins_, {});
    time_.assign(n_fft, 0.0f);
    accum_.assign(n_fft, 0.0f);
    norm_.assign(n_fft, 0.0f);
    reset();
}

void RtpghiSynthesizer::reset() {
    pushed_ = 0;
    rng_ = options_.seed;
    std::fill(accum_.begin(), accum_.end(), 0.0f);
    std::fill(norm_.begin(), norm_.end(), 0.0f);
    std::fill(prev_phase_.begin(), prev_phase_.end(), 0.0);
    std::fill(prev_significant_.begin(), prev_significant_.end(), 0);
}

double RtpghiSynthesizer::random_phase() {
    // splitmix64: tiny state, no allocation, the same sequence on every platform.
    std::uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return kTwoPi * static_cast<double>(z >> 11) * 0x1.0p-53;
}

void RtpghiSynthesizer::prepare_slot(Slot& slot) {
    slot.peak = *std::max_element(slot.magnitude.begin(), slot.magnitude.end());
    // Log magnitudes are floored at the significance threshold: bins below it get random
    // phase anyway, and the floor bounds the differences their neighbours see.
    if (slot.peak > 0.0f) {
        const float floor = slot.peak * static_cast<float>(options_.relative_tolerance);
        for (std::size_t k = 0; k < bins_; ++k) {
            slot.log_mag[k] = std::log(std::max(slot.magnitude[k], floor));
        }
    } else {
        std::fill(slot.log_mag.begin(), slot.log_mag.end(), kSilentLogMagnitude);
    }

    // Instantaneous frequency, rad/sample: the bin's own frequency plus the Gaussian
    // phase-magnitude correction from the slope of the log magnitude across bins. The slope is
    // zero at DC and (for even n_fft) at Nyquist, where a real signal's spectrum is symmetric.
    const double n_fft = static_cast<double>(n_fft_);
    const double correction = n_fft / lambda_;
    const std::size_t top = bins_ - 1;
    for (std::size_t k = 0; k < bins_; ++k) {
        double slope = 0.0;
        if (k > 0 && k < top) {
            slope = 0.5 * (double(slot.log_mag[k + 1]) - slot.log_mag[k - 1]);
        } else if (k == top && k > 0 && n_fft_ % 2 == 1) {
            slope = double(slot.log_mag[k]) - slot.log_mag[k - 1];
        }
        slot.omega[k] = static_cast<float>(kTwoPi * double(k) / n_fft + correction * slope);
    }
}

void RtpghiSynthesizer::integrate_phase(const Slot* prev, const Slot& cur, const Slot* next) {
    const std::size_t bins = bins_;
    if (!(cur.peak > 0.0f)) {
        // Nothing to hear: phases are irrelevant, and none of them may seed the next frame.
        std::fill(phase_.begin(), phase_.end(), 0.0);
        std::fill(significant_.begin(), significant_.end(), 0);
        return;
    }
    const float threshold = cur.peak * static_cast<float>(options_.relative_tolerance);
    std::size_t remaining = 0;
    for (std::size_t k = 0; k < bins; ++k) {
        significant_[k] = cur.magnitude[k] > threshold;
        done_[k] = 0;
        remaining += significant_[k];
    }

    // Frequency-direction derivative from the time slope of the log magnitude (centred over
    // the previous and next frames when both exist), rad/bin. The bound +-pi corresponds to
    // energy centred at the window's edge; anything beyond is an artefact of floored values.
    const double hop = static_cast<double>(hop_);
    const double scale = -lambda_ / static_cast<double>(n_fft_);
    for (std::size_t k = 0; k < bins; ++k) {
        if (!significant_[k]) continue;
        double slope = 0.0;  // per sample
        if (prev && next) {
            slope = (double(next->log_mag[k]) - prev->log_mag[k]) / (2.0 * hop);
        } else if (next) {
            slope = (double(next->log_mag[k]) - cur.log_mag[k]) / hop;
        } else if (prev) {
            slope = (double(cur.log_mag[k]) - prev->log_mag[k]) / hop;
        }
        fgrad_[k] =
            static_cast<float>(std::clamp(scale * slope, -std::numbers::pi, std::numbers::pi));
    }

    // Time step of bin k from the previous frame (trapezoidal rule over one hop).
    const auto from_previous = [&](std::size_t k) {
        const double prev_omega = prev ? prev->omega[k] : cur.omega[k];
        return prev_phase_[k] + 0.5 * hop * (prev_omega + double(cur.omega[k]));
    };

    // Max-heap on magnitude over heap_, which has room for every bin of both frames.
    const auto by_magnitude = [](const HeapEntry& a, const HeapEntry& b) {
        return a.magnitude < b.magnitude;
    };
    std::size_t size = 0;
    const auto push = [&](float magnitude, std::size_t bin, bool current) {
        heap_[size++] = HeapEntry{magnitude, static_cast<std::uint32_t>(bin), current};
        std::push_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(size),
                       by_magnitude);
    };
    const auto accept = [&](std::size_t k, double phase) {
        phase_[k] = phase;
        done_[k] = 1;
        --remaining;
        push(cur.magnitude[k], k, true);
    };
    if (prev) {
        for (std::size_t k = 0; k < bins; ++k) {
            if (prev_significant_[k]) push(prev->magnitude[k], k, false);
        }
    }
    while (remaining > 0) {
        if (size == 0) {
            // Nothing known leads here (an onset, or an island the previous frame did not
            // reach): start from the loudest bin left, continuing its own time track.
            std::size_t best = bins;
            for (std::size_t k = 0; k < bins; ++k) {
                if (significant_[k] && !done_[k] &&
                    (best == bins || cur.magnitude[k] > cur.magnitude[best])) {
                    best = k;
                }
            }
            accept(best, from_previous(best));
            continue;
        }
        std::pop_heap(heap_.begin(), heap_.begin() + static_cast<std::ptrdiff_t>(size),
                      by_magnitude);
        const HeapEntry top = heap_[--size];
        const std::size_t k = top.bin;
        if (!top.current) {
            if (significant_[k] && !done_[k]) accept(k, from_previous(k));
            continue;
        }
        if (k + 1 < bins && significant_[k + 1] && !done_[k + 1]) {
            accept(k + 1, phase_[k] + 0.5 * (double(fgrad_[k]) + fgrad_[k + 1]));
        }
        if (k > 0 && significant_[k - 1] && !done_[k - 1]) {
            accept(k - 1, phase_[k] - 0.5 * (double(fgrad_[k]) + fgrad_[k - 1]));
        }
    }
    for (std::size_t k = 0; k < bins; ++k) {
        // Wrapping keeps the running phases small, so double keeps full precision for ever.
        phase_[k] = done_[k] ? std::remainder(phase_[k], kTwoPi) : random_phase();
    }
}

void RtpghiSynthesizer::synthesise(std::size_t index, bool has_next, std::span<float> out_hop) {
    const Slot& cur = slots_[index % 3];
    const Slot* prev = index > 0 ? &slots_[(index - 1) % 3] : nullptr;
    const Slot* next = has_next ? &slots_[(index + 1) % 3] : nullptr;
    integrate_phase(prev, cur, next);

    // The phases are those of a window centred at n_fft / 2; the DFT frame starts n_fft / 2
    // earlier, which multiplies bin k by e^{-i pi k} = (-1)^k.
    for (std::size_t k = 0; k < bins_; ++k) {
        const float sign = (k & 1) ? -1.0f : 1.0f;
        const double phase = phase_[k];
        spectrum_[k] = std::complex<float>(sign * cur.magnitude[k] * float(std::cos(phase)),
                                           sign * cur.magnitude[k] * float(std::sin(phase)));
    }
    fft_.inverse(spectrum_, time_);
    for (std::size_t i = 0; i < n_fft_; ++i) {
        accum_[i] += time_[i] * window_[i];
        norm_[i] += window_[i] * window_[i];
    }
    emit(out_hop, hop_);

    std::swap(phase_, prev_phase_);
    std::swap(significant_, prev_significant_);
}

void RtpghiSynthesizer::emit(std::span<float> out, std::size_t count) {
    assert(out.size() >= count && count <= accum_.size());
    for (std::size_t j = 0; j < count; ++j) out[j] = accum_[j] / std::max(norm_[j], norm_floor_);
    const auto shift = static_cast<std::ptrdiff_t>(count);
    std::copy(accum_.begin() + shift, accum_.end(), accum_.begin());
    std::copy(norm_.begin() + shift, norm_.end(), norm_.begin());
    std::fill(accum_.end() - shift, accum_.end(), 0.0f);
    std::fill(norm_.end() - shift, norm_.end(), 0.0f);
}

void RtpghiSynthesizer::push_frame(std::span<const float> magnitude, std::span<float> out_hop) {
    assert(magnitude.size() == bins_ && out_hop.size() >= hop_);
    Slot& slot = slots_[pushed_ % 3];
    std::copy(magnitude.begin(), magnitude.end(), slot.magnitude.begin());
    prepare_slot(slot);
    ++pushed_;
    if (pushed_ == 1) {
        // Frame 0 waits for its look-ahead; this hop is part of latency_samples().
        std::fill_n(out_hop.begin(), hop_, 0.0f);
        return;
    }
    synthesise(pushed_ - 2, /*has_next=*/true, out_hop);
}

void RtpghiSynthesizer::flush(std::span<float> out) {
    assert(out.size() >= n_fft_);
    if (pushed_ == 0) {
        std::fill_n(out.begin(), n_fft_, 0.0f);
    } else {
        synthesise(pushed_ - 1, /*has_next=*/false, out.first(hop_));
        emit(out.subspan(hop_), n_fft_ - hop_);
    }
    reset();
}

MelPhaseVocoder::MelPhaseVocoder(const LogMelConfig& config, PhaseVocoderOptions options)
    : config_(validated(config)),
      // The analyser clamps quiet bands to log_floor, so a value at the clamp says only "below
      // the floor": treating it as zero is what makes silence in give silence out. The margin
      // absorbs float rounding of the clamp value.
      silent_below_(static_cast<float>(std::log(config.log_floor) +
                                       1e-4 * std::max(1.0, std::abs(std::log(config.log_floor))))),
      filterbank_(config.sample_rate, config.n_fft, config.n_mels, config.fmin, config.fmax,
                  config.scale, config.norm),
      inverter_(filterbank_),
      synthesizer_(config.n_fft, config.hop, log_mel_window(config),
                   RtpghiSynthesizer::hann_lambda(config.win_length), options),
      mel_(config.n_mels),
      magnitude_(config.n_bins()) {}

void MelPhaseVocoder::estimate_magnitude(std::span<const float> log_mel,
                                         std::span<float> magnitude) {
    assert(log_mel.size() == config_.n_mels && magnitude.size() == config_.n_bins());
    for (std::size_t m = 0; m < config_.n_mels; ++m) {
        const float v = log_mel[m];
        // !(v > ...) also catches NaN.
        mel_[m] = v > silent_below_ ? std::exp(std::min(v, kMaxLogMel)) : 0.0f;
    }
    inverter_.apply(mel_, magnitude);
    if (config_.power != 1.0) {
        const float inv_power = static_cast<float>(1.0 / config_.power);
        for (float& s : magnitude) s = std::pow(s, inv_power);
    }
}

void MelPhaseVocoder::push_frame(std::span<const float> log_mel, std::span<float> out_hop) {
    estimate_magnitude(log_mel, magnitude_);
    synthesizer_.push_frame(magnitude_, out_hop);
}

void MelPhaseVocoder::push_frames(std::span<const float> frames, std::size_t count,
                                  std::span<float> out) {
    const std::size_t n_mels = config_.n_mels, hop = config_.hop;
    assert(frames.size() >= count * n_mels && out.size() >= count * hop);
    for (std::size_t j = 0; j < count; ++j) {
        push_frame(frames.subspan(j * n_mels, n_mels), out.subspan(j * hop, hop));
    }
}

void MelPhaseVocoder::flush(std::span<float> out) {
    synthesizer_.flush(out);
}

void MelPhaseVocoder::reset() {
    synthesizer_.reset();
}

std::vector<float> MelPhaseVocoder::synthesize(std::span<const float> log_mel, std::size_t frames) {
    const std::size_t n_mels = config_.n_mels, hop = config_.hop;
    if (log_mel.size() != n_mels * frames) {
        throw std::invalid_argument(
            "MelPhaseVocoder::synthesize: " + std::to_string(log_mel.size()) + " values are not " +
            std::to_string(n_mels) + " mels x " + std::to_string(frames) + " frames");
    }
    reset();
    std::vector<float> out(frames * hop + flush_samples());
    std::vector<float> column(n_mels);
    for (std::size_t t = 0; t < frames; ++t) {
        for (std::size_t m = 0; m < n_mels; ++m) column[m] = log_mel[m * frames + t];
        push_frame(column, std::span(out).subspan(t * hop, hop));
    }
    flush(std::span(out).subspan(frames * hop));
    return out;
}

}  // namespace etude::dsp
