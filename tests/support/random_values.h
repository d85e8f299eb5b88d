// Seeded uniform random values: the same inputs on every run and machine,
// for the tests and the benchmarks (bench/ includes it too).
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace etude::test {

// `n` values uniform in [lo, hi), from `seed`.
template <class T>
std::vector<T> uniform_values(std::size_t n, T lo, T hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<T> d(lo, hi);
    std::vector<T> v(n);
    for (auto& e : v) e = d(rng);
    return v;
}

}  // namespace etude::test
