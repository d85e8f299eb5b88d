// The CPU backend's element-wise math (gpu/cpu/cpu_vector_math.h) gives each
// value the same bits wherever it lies in a run: shifted by 1 to 15 places
// (another lane of a vector, another share of the run in the tail), cut into
// ranges of odd lengths (as the workers' ranges and a batch's items cut a
// run), or in place. A batch then holds each item's values exactly as the
// item alone would (the HiFi-GAN and Piper flow batches rely on it). Their
// accuracy is tested in cpu_backend_test.cpp.
#include "gpu/cpu/cpu_vector_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "gpu/host_compute.h"
#include "support/random_values.h"

namespace etude::gpu {
namespace {

using test::uniform_values;

template <class T>
auto bits(T v) {
    if constexpr (sizeof(T) == 4)
        return std::bit_cast<std::uint32_t>(v);
    else
        return std::bit_cast<std::uint64_t>(v);
}

// apply(first, count, out): the function over the test's input values
// [first, first + count), read where they lie in the input arrays, writing
// `per_value` outputs each to out.
template <class T>
using Apply = std::function<void(std::size_t first, std::size_t count, T* out)>;

// Values past the first few vectors and a tail of 13 after whole 16-value
// blocks: every lane and every way of cutting below meets both.
constexpr std::size_t kValues = 16 * 20 + 13;

template <class T>
void expect_same_bits_wherever_a_value_lies(const std::string& name, std::size_t per_value,
                                            const Apply<T>& apply) {
    const std::size_t n = kValues;
    std::vector<T> whole(n * per_value);
    apply(0, n, whole.data());
    const auto expect_as_whole = [&](const std::vector<T>& got, std::size_t first,
                                     const std::string& how) {
        for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(bits(got[i]), bits(whole[first * per_value + i]))
                << name << " " << how << ": output " << i << " (value " << first + i / per_value
                << ") is " << got[i] << " here, " << whole[first * per_value + i]
                << " in the whole run";
    };
    for (std::size_t shift = 1; shift < 16; ++shift) {
        std::vector<T> part((n - shift) * per_value);
        apply(shift, n - shift, part.data());
        expect_as_whole(part, shift, "shifted by " + std::to_string(shift));
        if (::testing::Test::HasFatalFailure()) return;
    }
    // Ranges of odd lengths, one after another: each starts in another lane.
    const std::size_t lengths[] = {1, 3, 5, 7, 9, 13, 17, 19, 31, 33, 47};
    std::size_t first = 0;
    for (std::size_t j = 0; first < n; ++j) {
        const std::size_t length = std::min(lengths[j % std::size(lengths)], n - first);
        std::vector<T> part(length * per_value);
        apply(first, length, part.data());
        expect_as_whole(part, first, "in a range of " + std::to_string(length));
        if (::testing::Test::HasFatalFailure()) return;
        first += length;
    }
}

// f(in, out, n) over one input array, also in place.
template <class T>
void expect_position_free(const std::string& name, void (*f)(const T*, T*, std::size_t), T lo,
                          T hi) {
    const auto x = uniform_values<T>(kValues, lo, hi, 7);
    expect_same_bits_wherever_a_value_lies<T>(
        name, 1,
        [&](std::size_t first, std::size_t count, T* out) { f(x.data() + first, out, count); });
    auto y = x;
    f(y.data(), y.data(), y.size());
    std::vector<T> z(x.size());
    f(x.data(), z.data(), x.size());
    for (std::size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(bits(y[i]), bits(z[i])) << name << " in place: value " << i;
}

TEST(CpuVectorMath, each_value_gets_the_same_bits_wherever_it_lies) {
    expect_position_free<float>("gelu", cpu::gelu, -6.0f, 6.0f);
    expect_position_free<float>("tanh", cpu::tanh, -6.0f, 6.0f);
    expect_position_free<float>("exp", cpu::exp, -80.0f, 80.0f);
    expect_position_free<float>("sin", cpu::sin, -300.0f, 300.0f);
    expect_position_free<float>("cos", cpu::cos, -300.0f, 300.0f);
    expect_position_free<double>("host gelu", host::gelu, -8.0, 8.0);
    expect_position_free<double>("host exp", host::exp, -700.0, 10.0);
}

TEST(CpuVectorMath, small_tanh_arguments_get_the_same_bits_wherever_they_lie) {
    // Below 2^-8 the NEON tanh takes another formula, and libmvec's tanhf
    // has its own small-argument path: the same bits there too.
    expect_position_free<float>("tanh", cpu::tanh, -0.01f, 0.01f);
}

TEST(CpuVectorMath, gate_and_polar_give_each_value_the_same_bits_wherever_it_lies) {
    // Gates past -80 too, where exp's argument is held.
    const auto a = uniform_values<float>(kValues, -6.0f, 6.0f, 8),
               b = uniform_values<float>(kValues, -90.0f, 90.0f, 9);
    expect_same_bits_wherever_a_value_lies<float>(
        "gated_tanh", 1, [&](std::size_t first, std::size_t count, float* out) {
            cpu::gated_tanh(a.data() + first, b.data() + first, out, count);
        });
    // Log magnitudes past log(100), where the magnitude is held.
    const auto lm = uniform_values<float>(kValues, -10.0f, 6.0f, 10),
               phase = uniform_values<float>(kValues, -300.0f, 300.0f, 11);
    expect_same_bits_wherever_a_value_lies<float>(
        "polar", 2, [&](std::size_t first, std::size_t count, float* out) {
            cpu::polar(lm.data() + first, phase.data() + first, 100.0f, out, count);
        });
}

}  // namespace
}  // namespace etude::gpu
