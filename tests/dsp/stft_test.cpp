#include "dsp/stft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

#include "dsp/fft.h"
#include "dsp/window.h"

namespace etude::dsp {
namespace {

using Frames = std::vector<std::vector<std::complex<float>>>;

std::vector<float> test_signal(std::size_t n, unsigned seed) {
    // Noise plus a few tones: broadband and far from any window's symmetry.
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> noise(-0.3f, 0.3f);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(i);
        x[i] = static_cast<float>(0.4 * std::sin(0.031 * t) + 0.2 * std::sin(1.7 * t + 0.3)) +
               noise(rng);
    }
    return x;
}

// Block sizes cycling through `pattern` (0 means "random 1..500").
std::vector<std::size_t> block_plan(std::size_t total, std::vector<std::size_t> pattern,
                                    unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> random_size(1, 500);
    std::vector<std::size_t> blocks;
    for (std::size_t done = 0, i = 0; done < total; ++i) {
        std::size_t b = pattern[i % pattern.size()];
        if (b == 0) b = random_size(rng);
        b = std::min(b, total - done);
        blocks.push_back(b);
        done += b;
    }
    return blocks;
}

Frames stream_frames(StftStream& stft, const std::vector<float>& x,
                     const std::vector<std::size_t>& blocks) {
    Frames frames;
    std::vector<std::complex<float>> frame(stft.bins());
    std::size_t offset = 0;
    for (std::size_t b : blocks) {
        std::span<const float> in(x.data() + offset, b);
        offset += b;
        while (!in.empty() || stft.frame_ready()) {
            in = in.subspan(stft.push(in));
            if (stft.pop_frame(frame)) frames.push_back(frame);
        }
    }
    return frames;
}

void expect_frames_near(const Frames& got, const Frames& want, float tol) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t t = 0; t < got.size(); ++t) {
        ASSERT_EQ(got[t].size(), want[t].size());
        for (std::size_t k = 0; k < got[t].size(); ++k) {
            ASSERT_NEAR(std::abs(got[t][k] - want[t][k]), 0.0f, tol)
                << "frame " << t << " bin " << k;
        }
    }
}

TEST(Stft, streaming_frames_equal_offline_frames) {
    const std::size_t n_fft = 400, hop = 160;
    const auto window = make_window(WindowType::Hann, n_fft);
    const auto x = test_signal(5000, 1);

    StftStream immediate(n_fft, hop, window, StftStart::Immediate);
    const Frames got = stream_frames(immediate, x, block_plan(x.size(), {1, 7, 333, 0}, 2));
    expect_frames_near(got, stft_offline(x, n_fft, hop, window, false), 1e-4f);

    // A primed stream sees n_fft - hop zeros before the signal.
    StftStream primed(n_fft, hop, window, StftStart::ZeroPrimed);
    const Frames got_primed = stream_frames(primed, x, block_plan(x.size(), {0}, 3));
    std::vector<float> padded(n_fft - hop, 0.0f);
    padded.insert(padded.end(), x.begin(), x.end());
    expect_frames_near(got_primed, stft_offline(padded, n_fft, hop, window, false), 1e-4f);
}

TEST(Stft, primed_stream_gives_one_frame_per_hop_pushed) {
    const std::size_t n_fft = 512, hop = 128;
    StftStream stft(n_fft, hop, make_window(WindowType::Hann, n_fft));
    std::vector<float> block(hop, 0.5f);
    std::vector<std::complex<float>> frame(stft.bins());
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(stft.push(block), hop);
        EXPECT_TRUE(stft.pop_frame(frame));
        EXPECT_FALSE(stft.pop_frame(frame));
    }
}

TEST(Stft, process_callback_matches_push_and_pop) {
    const std::size_t n_fft = 256, hop = 64;
    const auto window = make_window(WindowType::Hamming, n_fft);
    const auto x = test_signal(3000, 4);
    StftStream a(n_fft, hop, window), b(n_fft, hop, window);
    const Frames want = stream_frames(a, x, {x.size()});
    Frames got;
    std::size_t offset = 0;
    for (std::size_t size : block_plan(x.size(), {13, 0}, 6)) {
        b.process(
            std::span<const float>(x.data() + offset, size),
            [&](std::span<const std::complex<float>> f) { got.emplace_back(f.begin(), f.end()); });
        offset += size;
    }
    expect_frames_near(got, want, 0.0f);
}

TEST(Stft, centered_offline_frames_use_reflect_padding) {
    const std::size_t n_fft = 8, hop = 2;
    const std::vector<float> window(n_fft, 1.0f);
    const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const Frames frames = stft_offline(x, n_fft, hop, window, true);
    EXPECT_EQ(frames.size(), 1 + x.size() / hop);

    RealFft fft(n_fft);
    std::vector<std::complex<float>> want(fft.bins());
    // Frame 0 is centred on x[0]: x[4] x[3] x[2] x[1] | x[0] x[1] x[2] x[3].
    const std::vector<float> first = {5, 4, 3, 2, 1, 2, 3, 4};
    fft.forward(first, want);
    expect_frames_near({frames.front()}, {want}, 1e-5f);
    // The last frame (t = 5, centred on x[10]) reaches past the end: x[6..11) | x[10] x[9] x[8].
    const std::vector<float> last = {7, 8, 9, 10, 11, 10, 9, 8};
    fft.forward(last, want);
    expect_frames_near({frames.back()}, {want}, 1e-5f);
}

struct RoundTrip {
    std::size_t n_fft;
    std::size_t hop;
    WindowType window;
};

void PrintTo(const RoundTrip& p, std::ostream* os) {
    *os << "n_fft " << p.n_fft << " hop " << p.hop << " window " << static_cast<int>(p.window);
}

// Runs x through a primed StftStream and an IstftStream, pushing in the given block sizes
// followed by enough silence to flush, and returns everything the ISTFT produced.
std::vector<float> round_trip(const RoundTrip& p, const std::vector<float>& x,
                              const std::vector<std::size_t>& blocks,
                              StftStart start = StftStart::ZeroPrimed) {
    const auto window = make_window(p.window, p.n_fft);
    StftStream stft(p.n_fft, p.hop, window, start);
    IstftStream istft(p.n_fft, p.hop, window);
    EXPECT_EQ(stft.latency(), p.n_fft - p.hop);
    EXPECT_EQ(istft.latency(), p.n_fft - p.hop);

    std::vector<float> input = x;
    input.resize(x.size() + p.n_fft + p.hop, 0.0f);
    std::vector<std::size_t> plan = blocks;
    plan.push_back(input.size() - x.size());

    std::vector<float> out;
    std::vector<float> hop_out(p.hop);
    std::size_t offset = 0;
    for (std::size_t b : plan) {
        stft.process(std::span<const float>(input.data() + offset, b),
                     [&](std::span<const std::complex<float>> frame) {
                         istft.push_frame(frame, hop_out);
                         out.insert(out.end(), hop_out.begin(), hop_out.end());
                     });
        offset += b;
    }
    return out;
}

class StftRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(StftRoundTrip, istft_of_stft_reconstructs_input_after_latency) {
    const RoundTrip p = GetParam();
    const auto x = test_signal(6000, static_cast<unsigned>(p.n_fft + p.hop));
    const auto y = round_trip(p, x, block_plan(x.size(), {0}, 11));
    const std::size_t latency = p.n_fft - p.hop;
    ASSERT_GE(y.size(), x.size() + latency);
    for (std::size_t m = 0; m < latency; ++m) ASSERT_NEAR(y[m], 0.0f, 1e-6) << "sample " << m;
    for (std::size_t m = 0; m < x.size(); ++m) {
        ASSERT_NEAR(y[m + latency], x[m], 1e-5) << "sample " << m;
    }
}

TEST_P(StftRoundTrip, reconstruction_is_independent_of_push_block_sizes) {
    const RoundTrip p = GetParam();
    const auto x = test_signal(4000, 99);
    const auto whole = round_trip(p, x, {x.size()});
    for (const auto& pattern :
         std::vector<std::vector<std::size_t>>{{1}, {7}, {333}, {1, 7, 333, 0}}) {
        const auto blocked = round_trip(p, x, block_plan(x.size(), pattern, 12));
        ASSERT_EQ(blocked.size(), whole.size());
        for (std::size_t m = 0; m < whole.size(); ++m) {
            ASSERT_EQ(blocked[m], whole[m]) << "sample " << m << " pattern[0] " << pattern[0];
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Stft, StftRoundTrip,
    ::testing::Values(
        RoundTrip{512, 128, WindowType::Hann}, RoundTrip{512, 256, WindowType::Hann},
        RoundTrip{1024, 256, WindowType::Hann}, RoundTrip{1024, 512, WindowType::Hann},
        RoundTrip{400, 100, WindowType::Hann}, RoundTrip{400, 200, WindowType::Hann},
        RoundTrip{400, 128, WindowType::Hann}, RoundTrip{512, 128, WindowType::Hamming},
        RoundTrip{1024, 256, WindowType::Hamming}, RoundTrip{400, 100, WindowType::Hamming},
        RoundTrip{1024, 128, WindowType::Blackman}, RoundTrip{512, 512, WindowType::Rectangular}));

TEST(Stft, immediate_stream_reconstructs_after_first_full_overlap) {
    const RoundTrip p{1024, 256, WindowType::Hann};
    const auto x = test_signal(5000, 21);
    const auto y = round_trip(p, x, block_plan(x.size(), {0}, 22), StftStart::Immediate);
    // No delay in this mode, but the first n_fft - hop samples lack full window overlap.
    ASSERT_GE(y.size(), x.size());
    for (std::size_t m = p.n_fft - p.hop; m < x.size(); ++m) {
        ASSERT_NEAR(y[m], x[m], 1e-5) << "sample " << m;
    }
}

TEST(Stft, drain_equals_pushing_silent_frames) {
    const std::size_t n_fft = 400, hop = 100;
    const auto window = make_window(WindowType::Hann, n_fft);
    const auto x = test_signal(2000, 31);
    const Frames frames = stft_offline(x, n_fft, hop, window, false);
    IstftStream a(n_fft, hop, window), b(n_fft, hop, window);
    std::vector<float> out_a(hop), out_b(hop);
    for (const auto& f : frames) {
        a.push_frame(f, out_a);
        b.push_frame(f, out_b);
    }
    std::vector<float> drained(a.latency());
    ASSERT_EQ(a.drain(drained), n_fft - hop);
    const std::vector<std::complex<float>> silence(n_fft / 2 + 1);
    for (std::size_t j = 0; j < drained.size(); j += hop) {
        b.push_frame(silence, out_b);
        for (std::size_t i = 0; i < hop; ++i) EXPECT_FLOAT_EQ(drained[j + i], out_b[i]);
    }
    // drain() also resets: the stream now starts from silence again.
    a.push_frame(silence, out_a);
    for (float v : out_a) EXPECT_EQ(v, 0.0f);
}

TEST(Stft, bad_sizes_throw) {
    const auto w = make_window(WindowType::Hann, 256);
    EXPECT_THROW(StftStream(256, 0, w), std::invalid_argument);
    EXPECT_THROW(StftStream(256, 257, w), std::invalid_argument);
    EXPECT_THROW(StftStream(512, 128, w), std::invalid_argument);
    EXPECT_THROW(IstftStream(256, 0, w), std::invalid_argument);
    EXPECT_THROW(IstftStream(128, 64, w), std::invalid_argument);
    EXPECT_THROW(stft_offline(w, 256, 300, w, false), std::invalid_argument);
}

TEST(Window, periodic_and_symmetric_shapes) {
    const auto hann = make_window(WindowType::Hann, 8);
    EXPECT_FLOAT_EQ(hann[0], 0.0f);
    EXPECT_FLOAT_EQ(hann[4], 1.0f);
    EXPECT_FLOAT_EQ(hann[2], 0.5f);
    // The symmetric length-9 window is the periodic length-8 one plus a closing zero.
    const auto sym = make_window(WindowType::Hann, 9, false);
    EXPECT_FLOAT_EQ(sym[8], 0.0f);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_NEAR(sym[i], hann[i], 1e-7);
    for (std::size_t i = 0; i < 8; ++i) EXPECT_NEAR(sym[i], sym[8 - i], 1e-7);
    const auto hamming = make_window(WindowType::Hamming, 8);
    EXPECT_FLOAT_EQ(hamming[0], 0.08f);
    EXPECT_FLOAT_EQ(hamming[4], 1.0f);
    const auto blackman = make_window(WindowType::Blackman, 8);
    EXPECT_NEAR(blackman[0], 0.0f, 1e-7);
    EXPECT_FLOAT_EQ(blackman[4], 1.0f);
    EXPECT_EQ(make_window(WindowType::Rectangular, 5), std::vector<float>(5, 1.0f));
    EXPECT_TRUE(make_window(WindowType::Hann, 0).empty());
    EXPECT_EQ(make_window(WindowType::Hann, 1), std::vector<float>{1.0f});
}

TEST(Window, parse_accepts_names_case_insensitively) {
    EXPECT_EQ(parse_window("hann"), WindowType::Hann);
    EXPECT_EQ(parse_window("Hanning"), WindowType::Hann);
    EXPECT_EQ(parse_window("HAMMING"), WindowType::Hamming);
    EXPECT_EQ(parse_window("blackman"), WindowType::Blackman);
    EXPECT_EQ(parse_window("rect"), WindowType::Rectangular);
    EXPECT_EQ(parse_window("boxcar"), WindowType::Rectangular);
    EXPECT_FALSE(parse_window("kaiser").has_value());
    EXPECT_FALSE(parse_window("").has_value());
}

}  // namespace
}  // namespace etude::dsp
