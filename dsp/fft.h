// Real-input FFT of a fixed size over FFTW single precision.
//
// Ownership: a RealFft owns its FFTW plans and aligned scratch buffers (RAII); it is movable,
// not copyable. Threading: construction and destruction take a process-wide mutex because
// FFTW's planner is not thread-safe; forward()/inverse() are real-time safe (no allocation,
// no locks) but use the object's scratch buffers, so one object must not be used by two
// threads at once.
#pragma once

#include <complex>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>

struct fftwf_plan_s;

namespace etude::dsp {

// The mutex that serialises every FFTW planner call in the process. Code that creates or
// destroys FFTW plans outside RealFft must hold it too.
std::mutex& fftw_planner_mutex();

class RealFft {
  public:
    // Creates the plans (not real-time safe). Throws std::invalid_argument if n < 2.
    explicit RealFft(std::size_t n);

    // A moved-from RealFft has size() == 0 and must not be used for transforms.
    RealFft(RealFft&& other) noexcept;
    RealFft& operator=(RealFft&& other) noexcept;
    RealFft(const RealFft&) = delete;
    RealFft& operator=(const RealFft&) = delete;
    ~RealFft() = default;

    std::size_t size() const { return n_; }
    std::size_t bins() const { return n_ / 2 + 1; }

    // in: size() samples; out: bins() values (unnormalised DFT, bins 0..n/2).
    void forward(std::span<const float> in, std::span<std::complex<float>> out);
    // in: bins() values; out: size() samples, scaled by 1/n so inverse(forward(x)) == x.
    // The imaginary parts of bin 0 (and of bin n/2 for even n) are ignored.
    void inverse(std::span<const std::complex<float>> in, std::span<float> out);

  private:
    struct PlanDeleter {
        void operator()(fftwf_plan_s* plan) const;
    };
    struct BufferDeleter {
        void operator()(void* p) const;
    };

    std::size_t n_ = 0;
    std::unique_ptr<float, BufferDeleter> real_;
    std::unique_ptr<std::complex<float>, BufferDeleter> spectrum_;
    std::unique_ptr<fftwf_plan_s, PlanDeleter> forward_plan_;
    std::unique_ptr<fftwf_plan_s, PlanDeleter> inverse_plan_;
};

}  // namespace etude::dsp
