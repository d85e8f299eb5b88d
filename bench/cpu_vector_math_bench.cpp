// The CPU backend's element-wise math (gpu/cpu/cpu_vector_math.h) on one
// thread: values per second for each
// function, at a length of whole 16-float blocks and at one with a tail of
// 13. The backend's activations are these loops split among the workers, so
// this is their speed without the pool's wake-up. main() comes from
// bench/main.cpp.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

#include "gpu/cpu/cpu_vector_math.h"
#include "gpu/host_compute.h"
#include "tests/support/random_values.h"

namespace {

namespace cpu = etude::gpu::cpu;
namespace host = etude::gpu::host;

using etude::test::uniform_values;

// fn(in, out, n) over n values in [lo, hi). Not in place, as the vocoders
// call them: the same inputs every pass, without a timed copy.
template <class T, class Fn>
void run(benchmark::State& state, T lo, T hi, Fn fn) {
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto x = uniform_values<T>(n, lo, hi, 1);
    std::vector<T> y(n);
    for (auto _ : state) {
        fn(x.data(), y.data(), n);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

void BM_CpuTanh(benchmark::State& s) {
    run<float>(s, -4.0f, 4.0f, [](const float* x, float* y, std::size_t n) { cpu::tanh(x, y, n); });
}
void BM_CpuExp(benchmark::State& s) {
    run<float>(s, -20.0f, 20.0f,
               [](const float* x, float* y, std::size_t n) { cpu::exp(x, y, n); });
}
void BM_CpuGelu(benchmark::State& s) {
    run<float>(s, -6.0f, 6.0f, [](const float* x, float* y, std::size_t n) { cpu::gelu(x, y, n); });
}
void BM_CpuSin(benchmark::State& s) {
    run<float>(s, -300.0f, 300.0f,
               [](const float* x, float* y, std::size_t n) { cpu::sin(x, y, n); });
}
void BM_CpuCos(benchmark::State& s) {
    run<float>(s, -300.0f, 300.0f,
               [](const float* x, float* y, std::size_t n) { cpu::cos(x, y, n); });
}
void BM_CpuGatedTanh(benchmark::State& s) {
    const auto n = static_cast<std::size_t>(s.range(0));
    const auto b = uniform_values<float>(n, -4.0f, 4.0f, 2);
    run<float>(s, -4.0f, 4.0f, [&](const float* a, float* y, std::size_t m) {
        cpu::gated_tanh(a, b.data(), y, m);
    });
}
// Per bin: one exp, one cos and one sin.
void BM_CpuPolar(benchmark::State& s) {
    const auto n = static_cast<std::size_t>(s.range(0));
    const auto phase = uniform_values<float>(n, -300.0f, 300.0f, 2);
    std::vector<float> out(2 * n);
    run<float>(s, -10.0f, 3.0f, [&](const float* x, float*, std::size_t m) {
        cpu::polar(x, phase.data(), 100.0f, out.data(), m);
        benchmark::DoNotOptimize(out.data());
    });
}
void BM_HostGelu(benchmark::State& s) {
    run<double>(s, -6.0, 6.0,
                [](const double* x, double* y, std::size_t n) { host::gelu(x, y, n); });
}
void BM_HostExp(benchmark::State& s) {
    run<double>(s, -20.0, 0.0,
                [](const double* x, double* y, std::size_t n) { host::exp(x, y, n); });
}

// 4096: whole blocks; 4109: a tail of 13 after them.
#define ETUDE_VECTOR_MATH_SIZES Arg(4096)->Arg(4109)
BENCHMARK(BM_CpuTanh)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuExp)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuGelu)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuSin)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuCos)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuGatedTanh)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_CpuPolar)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_HostGelu)->ETUDE_VECTOR_MATH_SIZES;
BENCHMARK(BM_HostExp)->ETUDE_VECTOR_MATH_SIZES;

}  // namespace
