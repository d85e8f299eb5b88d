// What the model parity tests (neural vocoders, Piper's VITS) share: the
// backend a parameterised test runs on, and the distance they are judged by.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "gpu/registry.h"

namespace etude::test {

// Every operation `backend` has been given while profiling (its
// profile's call counts): how many operations a push issued.
inline std::uint64_t operations(const gpu::Backend& backend) {
    std::uint64_t n = 0;
    for (const auto& t : backend.kernel_timings()) n += t.calls;
    return n;
}

// Native replays of a recording `backend` has run while profiling (one
// "replay" entry each, gpu/backend.h).
inline std::uint64_t replays(const gpu::Backend& backend) {
    std::uint64_t n = 0;
    for (const auto& t : backend.kernel_timings())
        if (t.name == "replay") n += t.calls;
    return n;
}

// The CPU backend, or the first device of `kind` the registry opens (PoCL
// for OpenCL in CI); nullptr with the reason in `why_not` when there is none.
inline std::shared_ptr<gpu::Backend> backend_of(gpu::BackendKind kind, std::string& why_not) {
    if (kind == gpu::BackendKind::Cpu) return gpu::shared_cpu_backend();
    auto& reg = gpu::DeviceRegistry::instance();
    for (const auto& d : reg.devices())
        if (d.kind == kind) return reg.open({gpu::to_string(kind), d.index});
    why_not = std::string("no ") + gpu::to_string(kind) + " device";
    for (const auto& n : reg.notes()) why_not += "; " + n;
    return nullptr;
}

// A test over backend kinds: backend_ is backend_of() the parameter, its
// health reset; the test is skipped where there is none (the reason, and
// `skipped` after it, said). A fixture that sets up more calls SetUp()
// first and returns if IsSkipped().
class OnBackend : public ::testing::TestWithParam<gpu::BackendKind> {
  protected:
    explicit OnBackend(std::string skipped = "") : skipped_(std::move(skipped)) {}
    void SetUp() override {
        std::string why;
        backend_ = backend_of(GetParam(), why);
        if (!backend_) GTEST_SKIP() << why << skipped_;
        backend_->reset_health();
    }
    std::shared_ptr<gpu::Backend> backend_;

  private:
    std::string skipped_;
};

// The largest difference over the common length; a NaN on either side
// counts as infinitely far, so it can never pass a bound.
inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
    double d = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        const double e = std::abs(static_cast<double>(a[i]) - b[i]);
        d = std::max(d, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    }
    return d;
}

// Whether a batch gives each item the bits it gets alone or in any other
// batch: true where each output is one shared kernel body summing in a fixed
// order (Vulkan, OpenCL); false for the CPU backend's SGEMM and for CUDA,
// whose GEMMs and convolutions (as GEMMs) are cuBLAS's, which picks a
// blocking, and with it an order of summation, by the product's shape.
// Where false, a test holds a batch to its float-rounding bound instead
// (first seen on an H200, 2026-11-30: 1e-7 to 3e-6 between a batch and its
// items alone, or between batches of other sizes).
inline bool batch_keeps_bits(gpu::BackendKind kind) {
    return kind == gpu::BackendKind::Vulkan || kind == gpu::BackendKind::OpenCl;
}

// Bit for bit the same, and as long.
inline bool identical(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// The root mean square (0 for nothing): a check that audio compared is not
// silence.
inline double rms(std::span<const float> a) {
    double sum = 0;
    for (float v : a) sum += static_cast<double>(v) * v;
    return a.empty() ? 0 : std::sqrt(sum / static_cast<double>(a.size()));
}

}  // namespace etude::test
