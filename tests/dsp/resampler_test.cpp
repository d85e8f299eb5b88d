#include "dsp/resampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

namespace etude::dsp {
namespace {

constexpr double kToneHz = 440.0;
constexpr double kAmplitude = 0.5;

std::vector<float> tone(double rate, std::size_t n) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] =
            static_cast<float>(kAmplitude * std::sin(2.0 * std::numbers::pi * kToneHz * i / rate));
    }
    return x;
}

// Feeds `x` in blocks (0 = one block; otherwise random sizes 1..max_block, with some
// single-sample and empty blocks mixed in), flushes, and returns all output.
std::vector<float> resample(StreamingResampler& r, const std::vector<float>& x,
                            std::size_t max_block, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> size(1, std::max<std::size_t>(1, max_block));
    std::vector<float> out;
    std::vector<float> buffer;
    std::size_t offset = 0;
    for (int call = 0; offset < x.size(); ++call) {
        std::size_t n = max_block == 0 ? x.size() : size(rng);
        if (max_block != 0 && call % 17 == 0) n = 1;
        if (max_block != 0 && call % 29 == 0) n = 0;
        n = std::min(n, x.size() - offset);
        const bool last = offset + n == x.size();
        buffer.resize(r.max_output_for(n));
        const std::size_t got =
            r.process(std::span<const float>(x.data() + offset, n), buffer, last);
        EXPECT_LE(got, buffer.size());
        out.insert(out.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(got));
        offset += n;
    }
    return out;
}

struct Conversion {
    double in_rate;
    double out_rate;
    ResamplerQuality quality;
};

void PrintTo(const Conversion& c, std::ostream* os) {
    *os << c.in_rate << " -> " << c.out_rate << " quality " << static_cast<int>(c.quality);
}

class ResamplerConversion : public ::testing::TestWithParam<Conversion> {};

TEST_P(ResamplerConversion, sine_keeps_length_and_shape_within_minus_60_db) {
    const Conversion c = GetParam();
    const std::size_t n_in = static_cast<std::size_t>(c.in_rate);  // one second
    StreamingResampler r(c.in_rate, c.out_rate, c.quality);
    EXPECT_DOUBLE_EQ(r.ratio(), c.out_rate / c.in_rate);
    const auto y = resample(r, tone(c.in_rate, n_in), 700, 1);

    const double expected_len = static_cast<double>(n_in) * r.ratio();
    EXPECT_NEAR(static_cast<double>(y.size()), expected_len, 3.0);

    // Away from the edges, where the converter sees the signal switch on and off.
    const auto ideal = tone(c.out_rate, y.size());
    const std::size_t edge = static_cast<std::size_t>(0.02 * c.out_rate);
    double err = 0.0, ref = 0.0;
    for (std::size_t m = edge; m + edge < y.size(); ++m) {
        const double d = static_cast<double>(y[m]) - ideal[m];
        err += d * d;
        ref += static_cast<double>(ideal[m]) * ideal[m];
    }
    const double db = 10.0 * std::log10(err / ref);
    EXPECT_LT(db, -60.0) << "error " << db << " dB";
}

TEST_P(ResamplerConversion, output_is_the_same_for_one_block_or_many) {
    const Conversion c = GetParam();
    const auto x = tone(c.in_rate, static_cast<std::size_t>(c.in_rate / 2));
    StreamingResampler r(c.in_rate, c.out_rate, c.quality);
    const auto whole = resample(r, x, 0, 0);
    // The same object again: a flush leaves it ready for a new stream.
    for (std::size_t max_block : {1, 7, 333, 2000}) {
        const auto blocked = resample(r, x, max_block, static_cast<unsigned>(max_block));
        ASSERT_EQ(blocked.size(), whole.size()) << "max block " << max_block;
        for (std::size_t m = 0; m < whole.size(); ++m) {
            ASSERT_NEAR(blocked[m], whole[m], 1e-6) << "sample " << m << " max block " << max_block;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Resampler, ResamplerConversion,
                         ::testing::Values(Conversion{16000, 48000, ResamplerQuality::SincMedium},
                                           Conversion{48000, 44100, ResamplerQuality::SincMedium},
                                           Conversion{16000, 22050, ResamplerQuality::SincMedium},
                                           Conversion{16000, 8000, ResamplerQuality::SincMedium},
                                           Conversion{16000, 48000, ResamplerQuality::SincBest},
                                           Conversion{16000, 48000, ResamplerQuality::SincFastest},
                                           Conversion{48000, 44100, ResamplerQuality::SincBest}));

TEST(Resampler, reset_discards_buffered_history) {
    const auto x = tone(16000, 1000);
    StreamingResampler a(16000, 48000), b(16000, 48000);
    std::vector<float> out_a(a.max_output_for(x.size())), out_b(b.max_output_for(x.size()));
    std::vector<float> junk(a.max_output_for(500));
    a.process(std::span<const float>(x).first(500), junk);
    a.reset();
    const std::size_t na = a.process(x, out_a, true);
    const std::size_t nb = b.process(x, out_b, true);
    ASSERT_EQ(na, nb);
    for (std::size_t i = 0; i < na; ++i) ASSERT_EQ(out_a[i], out_b[i]) << "sample " << i;
}

TEST(Resampler, max_output_for_bounds_the_flush_of_tiny_inputs) {
    // The hardest case for the bound: history released by a flush after almost no new input.
    for (double out_rate : {4000.0, 16000.0, 96000.0, 16000.0 * 255}) {
        StreamingResampler r(16000, out_rate, ResamplerQuality::SincBest);
        const auto x = tone(16000, 300);
        std::vector<float> out(r.max_output_for(x.size()));
        std::size_t total = r.process(x, out);
        std::vector<float> tail(r.max_output_for(1));
        total += r.process(std::span<const float>(x).first(1), tail, true);
        EXPECT_NEAR(static_cast<double>(total), 301.0 * r.ratio(), 3.0 + r.ratio())
            << "out rate " << out_rate;
    }
}

TEST(Resampler, invalid_rates_throw) {
    EXPECT_THROW(StreamingResampler(0.0, 48000), std::invalid_argument);
    EXPECT_THROW(StreamingResampler(16000, -1.0), std::invalid_argument);
    EXPECT_THROW(StreamingResampler(std::nan(""), 48000), std::invalid_argument);
    EXPECT_THROW(StreamingResampler(16000, INFINITY), std::invalid_argument);
    EXPECT_THROW(StreamingResampler(100, 100 * 300.0), std::invalid_argument);
    EXPECT_THROW(StreamingResampler(100 * 300.0, 100), std::invalid_argument);
    try {
        StreamingResampler bad(16000, 0.0);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("out_rate"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(StreamingResampler(1000, 256000));
}

}  // namespace
}  // namespace etude::dsp
