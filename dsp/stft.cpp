#include "dsp/stft.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

namespace etude::dsp {

namespace {

// Validates in the constructors' initialiser lists so RealFft never sees a bad size.
std::size_t checked_n_fft(const char* who, std::size_t n_fft, std::size_t hop,
                          std::size_t window_size) {
    const std::string prefix = std::string(who) + ": ";
    if (n_fft < 2) throw std::invalid_argument(prefix + "n_fft must be >= 2");
    if (hop < 1 || hop > n_fft) {
        throw std::invalid_argument(prefix + "hop must be in [1, n_fft], got " +
                                    std::to_string(hop));
    }
    if (window_size != n_fft) {
        throw std::invalid_argument(prefix + "window has " + std::to_string(window_size) +
                                    " values, expected n_fft = " + std::to_string(n_fft));
    }
    return n_fft;
}

// Index into a signal of `size` samples for a position that may lie outside it, mirroring
// about the end samples without repeating them (numpy's "reflect"). Repeats the mirroring
// for signals shorter than the padding instead of refusing them as torch does.
std::size_t reflect_index(std::ptrdiff_t i, std::size_t size) {
    if (size == 1) return 0;
    const auto period = static_cast<std::ptrdiff_t>(2 * (size - 1));
    std::ptrdiff_t m = i % period;
    if (m < 0) m += period;
    if (m >= static_cast<std::ptrdiff_t>(size)) m = period - m;
    return static_cast<std::size_t>(m);
}

}  // namespace

StftStream::StftStream(std::size_t n_fft, std::size_t hop, std::span<const float> window,
                       StftStart start)
    : n_fft_(checked_n_fft("StftStream", n_fft, hop, window.size())),
      hop_(hop),
      start_(start),
      window_(window.begin(), window.end()),
      buffer_(n_fft, 0.0f),
      windowed_(n_fft, 0.0f),
      frame_(n_fft / 2 + 1),
      fft_(n_fft) {
    reset();
}

void StftStream::reset() {
    std::fill(buffer_.begin(), buffer_.end(), 0.0f);
    filled_ = start_ == StftStart::ZeroPrimed ? n_fft_ - hop_ : 0;
}

std::size_t StftStream::push(std::span<const float> in) {
    const std::size_t take = std::min(in.size(), n_fft_ - filled_);
    std::copy_n(in.begin(), take, buffer_.begin() + static_cast<std::ptrdiff_t>(filled_));
    filled_ += take;
    return take;
}

bool StftStream::pop_frame(std::span<std::complex<float>> out) {
    if (!frame_ready()) return false;
    assert(out.size() == bins());
    for (std::size_t i = 0; i < n_fft_; ++i) windowed_[i] = buffer_[i] * window_[i];
    fft_.forward(windowed_, out);
    // Shifting n_fft - hop samples per hop costs less than the FFT and keeps each frame
    // contiguous for it, which a ring buffer would not.
    std::copy(buffer_.begin() + static_cast<std::ptrdiff_t>(hop_), buffer_.end(), buffer_.begin());
    filled_ = n_fft_ - hop_;
    return true;
}

IstftStream::IstftStream(std::size_t n_fft, std::size_t hop, std::span<const float> window)
    : n_fft_(checked_n_fft("IstftStream", n_fft, hop, window.size())),
      hop_(hop),
      window_(window.begin(), window.end()),
      inv_norm_(hop, 0.0f),
      accum_(n_fft, 0.0f),
      time_(n_fft, 0.0f),
      fft_(n_fft) {
    // In steady state, output position j (mod hop) is covered by window samples j, j + hop,
    // j + 2 hop, ... of successive frames; least-squares overlap-add divides by the sum of
    // their squares. Sums are taken in double so tiny tails of long windows still count.
    std::vector<double> sums(hop, 0.0);
    for (std::size_t i = 0; i < n_fft; ++i) {
        sums[i % hop] += static_cast<double>(window_[i]) * static_cast<double>(window_[i]);
    }
    const double largest = *std::max_element(sums.begin(), sums.end());
    for (std::size_t j = 0; j < hop; ++j) {
        // Relative threshold: a position the window never reaches cannot be reconstructed,
        // and dividing its rounding noise by ~0 would only produce garbage.
        if (sums[j] > largest * 1e-12) inv_norm_[j] = static_cast<float>(1.0 / sums[j]);
    }
}

void IstftStream::reset() {
    std::fill(accum_.begin(), accum_.end(), 0.0f);
}

void IstftStream::push_frame(std::span<const std::complex<float>> frame, std::span<float> out) {
    assert(frame.size() == bins() && out.size() >= hop_);
    fft_.inverse(frame, time_);
    for (std::size_t i = 0; i < n_fft_; ++i) accum_[i] += time_[i] * window_[i];
    for (std::size_t j = 0; j < hop_; ++j) out[j] = accum_[j] * inv_norm_[j];
    std::copy(accum_.begin() + static_cast<std::ptrdiff_t>(hop_), accum_.end(), accum_.begin());
    std::fill(accum_.end() - static_cast<std::ptrdiff_t>(hop_), accum_.end(), 0.0f);
}

std::size_t IstftStream::drain(std::span<float> out) {
    const std::size_t n = latency();
    assert(out.size() >= n);
    for (std::size_t j = 0; j < n; ++j) out[j] = accum_[j] * inv_norm_[j % hop_];
    reset();
    return n;
}

std::vector<std::vector<std::complex<float>>> stft_offline(std::span<const float> signal,
                                                           std::size_t n_fft, std::size_t hop,
                                                           std::span<const float> window,
                                                           bool center) {
    checked_n_fft("stft_offline", n_fft, hop, window.size());
    std::vector<std::vector<std::complex<float>>> frames;
    if (signal.empty()) return frames;

    const std::size_t pad = center ? n_fft / 2 : 0;
    const std::size_t padded = signal.size() + 2 * pad;
    if (padded < n_fft) return frames;
    const std::size_t count = 1 + (padded - n_fft) / hop;

    RealFft fft(n_fft);
    std::vector<float> windowed(n_fft);
    frames.reserve(count);
    for (std::size_t t = 0; t < count; ++t) {
        for (std::size_t i = 0; i < n_fft; ++i) {
            const auto pos =
                static_cast<std::ptrdiff_t>(t * hop + i) - static_cast<std::ptrdiff_t>(pad);
            windowed[i] = signal[reflect_index(pos, signal.size())] * window[i];
        }
        frames.emplace_back(fft.bins());
        fft.forward(windowed, frames.back());
    }
    return frames;
}

}  // namespace etude::dsp
