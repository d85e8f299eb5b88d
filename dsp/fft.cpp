#include "dsp/fft.h"

#include <fftw3.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace etude::dsp {

std::mutex& fftw_planner_mutex() {
    static std::mutex mutex;
    return mutex;
}

void RealFft::PlanDeleter::operator()(fftwf_plan_s* plan) const {
    std::lock_guard lock(fftw_planner_mutex());
    fftwf_destroy_plan(plan);
}

void RealFft::BufferDeleter::operator()(void* p) const {
    fftwf_free(p);
}

RealFft::RealFft(std::size_t n) : n_(n) {
    if (n < 2) {
        throw std::invalid_argument("RealFft: size must be >= 2, got " + std::to_string(n));
    }
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        throw std::invalid_argument("RealFft: size too large for FFTW, got " + std::to_string(n));
    }
    // fftwf_malloc gives the SIMD alignment the planner assumes, so the plans stay valid for
    // these buffers and execute never has to fall back to unaligned code paths.
    real_.reset(static_cast<float*>(fftwf_malloc(sizeof(float) * n)));
    spectrum_.reset(
        static_cast<std::complex<float>*>(fftwf_malloc(sizeof(fftwf_complex) * bins())));
    if (!real_ || !spectrum_) throw std::bad_alloc();

    auto* cplx = reinterpret_cast<fftwf_complex*>(spectrum_.get());
    const int size = static_cast<int>(n);
    std::lock_guard lock(fftw_planner_mutex());
    // FFTW_ESTIMATE keeps construction fast and deterministic; MEASURE would also overwrite
    // the buffers and can take seconds for awkward sizes.
    forward_plan_.reset(fftwf_plan_dft_r2c_1d(size, real_.get(), cplx, FFTW_ESTIMATE));
    inverse_plan_.reset(fftwf_plan_dft_c2r_1d(size, cplx, real_.get(), FFTW_ESTIMATE));
    if (!forward_plan_ || !inverse_plan_) {
        throw std::runtime_error("RealFft: FFTW failed to create plans for size " +
                                 std::to_string(n));
    }
}

RealFft::RealFft(RealFft&& other) noexcept
    : n_(std::exchange(other.n_, 0)),
      real_(std::move(other.real_)),
      spectrum_(std::move(other.spectrum_)),
      forward_plan_(std::move(other.forward_plan_)),
      inverse_plan_(std::move(other.inverse_plan_)) {}

RealFft& RealFft::operator=(RealFft&& other) noexcept {
    if (this != &other) {
        // Plans go before their buffers, mirroring destruction order.
        forward_plan_ = std::move(other.forward_plan_);
        inverse_plan_ = std::move(other.inverse_plan_);
        real_ = std::move(other.real_);
        spectrum_ = std::move(other.spectrum_);
        n_ = std::exchange(other.n_, 0);
    }
    return *this;
}

void RealFft::forward(std::span<const float> in, std::span<std::complex<float>> out) {
    assert(in.size() == n_ && out.size() == bins());
    std::copy_n(in.begin(), n_, real_.get());
    fftwf_execute(forward_plan_.get());
    std::copy_n(spectrum_.get(), bins(), out.begin());
}

void RealFft::inverse(std::span<const std::complex<float>> in, std::span<float> out) {
    assert(in.size() == bins() && out.size() == n_);
    // c2r destroys its input, so it always runs on the scratch copy, never on the caller's.
    std::copy_n(in.begin(), bins(), spectrum_.get());
    fftwf_execute(inverse_plan_.get());
    const float scale = 1.0f / static_cast<float>(n_);
    const float* src = real_.get();
    for (std::size_t i = 0; i < n_; ++i) out[i] = src[i] * scale;
}

}  // namespace etude::dsp
