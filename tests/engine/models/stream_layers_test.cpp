// The stream layers (engine/models/stream_layers.h) against the same layer run on
// the whole signal with its zero padding, on the CPU backend: shapes beyond
// the published vocoders' (kernels spanning 3 and 4 strides, dilations,
// groups, kernel 1), and chunk patterns with empty chunks, single samples,
// chunks shorter than the lag and a flush with or without a last chunk.
#include "engine/models/stream_layers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu/registry.h"

namespace etude::engine {
namespace {

class StreamLayers : public ::testing::Test {
  protected:
    gpu::DeviceBuffer upload(const std::vector<float>& v) {
        auto b = cpu_->allocate(std::max<std::size_t>(v.size(), 1), "test");
        if (!v.empty()) cpu_->copy_to_device(*q_, b, 0, v.data(), v.size());
        return b;
    }
    std::vector<float> download(const SignalRef& s) {
        std::vector<float> v(static_cast<std::size_t>(s.channels) * s.length);
        if (!v.empty()) cpu_->copy_to_host(*q_, v.data(), *s.buffer, 0, v.size());
        return v;
    }
    std::vector<float> random(std::size_t n) {
        std::normal_distribution<float> d(0.0f, 1.0f);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng_);
        return v;
    }
    // Chunk lengths summing to `total`: empty ones, single samples and
    // longer runs, in an order the seed picks.
    std::vector<int> chunks(int total) {
        std::vector<int> out;
        std::uniform_int_distribution<int> pick(0, 6);
        for (int left = total; left > 0;) {
            const int k = pick(rng_);
            const int n = std::min(left, k == 0 ? 0 : k == 1 ? 1 : k * 3 - 2);
            out.push_back(n);
            left -= n;
        }
        return out;
    }
    // Feeds x ([channels][length]) through push() in the given chunks, then
    // flushes (with the last chunk, or alone), and collects the outputs.
    template <typename Layer>
    std::vector<float> stream(Layer& layer, const std::vector<float>& x, int channels, int length,
                              const std::vector<int>& sizes, bool flush_with_last) {
        std::vector<std::vector<float>> rows(static_cast<std::size_t>(channels));
        int out_channels = 0;
        int at = 0;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const int n = sizes[i];
            std::vector<float> part(static_cast<std::size_t>(channels) * n);
            for (int c = 0; c < channels; ++c)
                std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(c) * length + at, n,
                            part.begin() + static_cast<std::ptrdiff_t>(c) * n);
            at += n;
            auto buf = upload(part);
            const bool flush = flush_with_last && i + 1 == sizes.size();
            append(layer.push(*q_, {&buf, channels, n}, flush), rows, out_channels);
        }
        if (!flush_with_last || sizes.empty()) {
            auto none = upload({});
            append(layer.push(*q_, {&none, channels, 0}, true), rows, out_channels);
        }
        std::vector<float> out;
        for (int c = 0; c < out_channels; ++c)
            out.insert(out.end(), rows[c].begin(), rows[c].end());
        return out;
    }
    void append(const SignalRef& s, std::vector<std::vector<float>>& rows, int& channels) {
        const auto v = download(s);
        channels = std::max(channels, s.channels);
        if (rows.size() < static_cast<std::size_t>(s.channels)) rows.resize(s.channels);
        for (int c = 0; c < s.channels; ++c)
            rows[c].insert(rows[c].end(), v.begin() + static_cast<std::ptrdiff_t>(c) * s.length,
                           v.begin() + static_cast<std::ptrdiff_t>(c + 1) * s.length);
    }
    static double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
        double d = a.size() == b.size() ? 0.0 : INFINITY;
        for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
            d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
        return d;
    }

    std::shared_ptr<gpu::Backend> cpu_ = gpu::shared_cpu_backend();
    std::unique_ptr<gpu::Queue> q_ = cpu_->create_queue();
    StreamScratch scratch_;
    ScratchBuffer out_;
    std::mt19937 rng_{5};
};

TEST_F(StreamLayers, conv_equals_the_whole_signal_conv) {
    struct Case {
        int in, out, kernel, dilation, groups;
        bool leaky;
    };
    for (Case c : {Case{2, 3, 1, 1, 1, false}, Case{2, 3, 3, 1, 1, true}, Case{3, 2, 5, 3, 1, true},
                   Case{4, 4, 7, 1, 4, false}, Case{2, 2, 11, 5, 1, true}})
        for (int length : {0, 1, 9, 40})
            for (int pattern = 0; pattern < 4; ++pattern) {
                gpu::Conv1dShape s;
                s.in_channels = c.in;
                s.out_channels = c.out;
                s.kernel = c.kernel;
                s.dilation = c.dilation;
                s.groups = c.groups;
                s.padding = (c.kernel - 1) * c.dilation / 2;
                s.in_length = length;
                const auto w =
                    upload(random(static_cast<std::size_t>(c.out) * (c.in / c.groups) * c.kernel));
                const auto b = upload(random(static_cast<std::size_t>(c.out)));
                auto x = random(static_cast<std::size_t>(c.in) * length);
                // Whole signal: leaky ReLU, then the padded conv.
                std::vector<float> want;
                if (length > 0) {
                    auto xa = x;
                    if (c.leaky)
                        for (auto& v : xa) v = v > 0 ? v : 0.1f * v;
                    auto xb = upload(xa);
                    auto yb = cpu_->allocate(static_cast<std::size_t>(c.out) * length, "test");
                    cpu_->conv1d(*q_, s, xb, w, b, yb);
                    want.resize(static_cast<std::size_t>(c.out) * length);
                    cpu_->copy_to_host(*q_, want.data(), yb, 0, want.size());
                }
                StreamConv layer(*cpu_, *q_, s, w, b,
                                 c.leaky ? std::optional<float>(0.1f) : std::nullopt, scratch_,
                                 out_);
                const auto got = stream(layer, x, c.in, length, chunks(length), pattern % 2 == 0);
                EXPECT_LE(max_abs_diff(got, want), 1e-5)
                    << "kernel " << c.kernel << " dilation " << c.dilation << " length " << length
                    << " pattern " << pattern;
            }
}

// Upsamplers whose kernel spans 2, 3 and 4 strides (HiFi-GAN's is 2): with
// kernel 3 x stride a first chunk of one sample makes fewer outputs than the
// padding to crop, which once dropped real samples later.
TEST_F(StreamLayers, upsampler_equals_the_whole_signal_transposed_conv) {
    struct Case {
        int in, out, stride, spans;
    };
    for (Case c :
         {Case{3, 2, 2, 2}, Case{2, 2, 2, 3}, Case{2, 3, 4, 3}, Case{2, 2, 2, 4}, Case{3, 2, 8, 2}})
        for (int length : {0, 1, 2, 13})
            for (int pattern = 0; pattern < 4; ++pattern) {
                gpu::Conv1dShape s;
                s.in_channels = c.in;
                s.out_channels = c.out;
                s.stride = c.stride;
                s.kernel = c.stride * c.spans;
                s.padding = (s.kernel - c.stride) / 2;
                s.in_length = length;
                ASSERT_TRUE(StreamUpsample::supports(s));
                const auto w = upload(random(static_cast<std::size_t>(c.in) * c.out * s.kernel));
                const auto b = upload(random(static_cast<std::size_t>(c.out)));
                const auto x = random(static_cast<std::size_t>(c.in) * length);
                std::vector<float> want;
                if (length > 0) {
                    auto xb = upload(x);
                    const int out_len = s.transpose_out_length();
                    auto yb = cpu_->allocate(static_cast<std::size_t>(c.out) * out_len, "test");
                    cpu_->conv_transpose1d(*q_, s, xb, w, b, yb);
                    want.resize(static_cast<std::size_t>(c.out) * out_len);
                    cpu_->copy_to_host(*q_, want.data(), yb, 0, want.size());
                }
                StreamUpsample layer(*cpu_, *q_, s, w, b, std::nullopt, scratch_, out_);
                // One sample first, then the seed's pattern.
                std::vector<int> sizes = {std::min(length, 1)};
                for (int n : chunks(length - sizes[0])) sizes.push_back(n);
                const auto got = stream(layer, x, c.in, length, sizes, pattern % 2 == 0);
                EXPECT_LE(max_abs_diff(got, want), 1e-5)
                    << "stride " << c.stride << " kernel " << s.kernel << " length " << length
                    << " pattern " << pattern;
            }
}

TEST_F(StreamLayers, delay_hands_out_the_signal_unchanged) {
    for (int delay : {0, 1, 4})
        for (int length : {0, 3, 25})
            for (int pattern = 0; pattern < 3; ++pattern) {
                const auto x = random(2 * static_cast<std::size_t>(length));
                StreamDelay layer(*cpu_, *q_, 2, delay, out_);
                const auto got = stream(layer, x, 2, length, chunks(length), pattern == 0);
                EXPECT_EQ(got, x) << "delay " << delay << " length " << length;
            }
}

// Each push hands out exactly what lies `delay` samples back, whatever the
// chunk lengths (chunks shorter and longer than the delay, empty ones).
TEST_F(StreamLayers, delay_lags_by_exactly_its_delay) {
    for (int delay : {0, 1, 3, 7}) {
        StreamDelay layer(*cpu_, *q_, 1, delay, out_);
        int in_total = 0, out_total = 0;
        for (int n : {0, 1, 2, 9, 1, 0, 4, 15, 3}) {
            std::vector<float> part(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i) part[i] = static_cast<float>(in_total + i);
            auto buf = upload(part);
            in_total += n;
            const auto got = download(layer.push(*q_, {&buf, 1, n}, false));
            ASSERT_EQ(static_cast<int>(got.size()), std::max(in_total - delay, 0) - out_total)
                << "delay " << delay << " after " << in_total << " samples";
            for (float v : got) EXPECT_EQ(v, static_cast<float>(out_total++));
        }
        auto none = upload({});
        const auto rest = download(layer.push(*q_, {&none, 1, 0}, true));
        EXPECT_EQ(static_cast<int>(rest.size()), in_total - out_total);
        for (float v : rest) EXPECT_EQ(v, static_cast<float>(out_total++));
    }
}

// Layers of one stream share their scratch, and a conv may write the buffer
// its input came from: a conv -> conv -> delay chain with one window, one
// buffer for both convs' outputs and one for the delay's equals the same
// convs run on the whole signal.
TEST_F(StreamLayers, chained_layers_sharing_buffers_equal_the_whole_signal) {
    const int channels = 3, length = 57;
    gpu::Conv1dShape a;
    a.in_channels = a.out_channels = channels;
    a.kernel = 3;
    a.dilation = 2;
    a.padding = 2;
    a.in_length = length;
    gpu::Conv1dShape c = a;
    c.kernel = 5;
    c.dilation = 1;
    c.padding = 2;
    const auto wa = upload(random(static_cast<std::size_t>(channels) * channels * a.kernel));
    const auto wc = upload(random(static_cast<std::size_t>(channels) * channels * c.kernel));
    const auto ba = upload(random(channels)), bc = upload(random(channels));
    const auto x = random(static_cast<std::size_t>(channels) * length);
    // Whole signal: a, then c, each with its zero padding.
    const std::size_t n = static_cast<std::size_t>(channels) * length;
    auto xb = upload(x);
    auto ya = cpu_->allocate(n, "test"), yc = cpu_->allocate(n, "test");
    cpu_->conv1d(*q_, a, xb, wa, ba, ya);
    cpu_->conv1d(*q_, c, ya, wc, bc, yc);
    std::vector<float> want(n);
    cpu_->copy_to_host(*q_, want.data(), yc, 0, n);

    for (int pattern = 0; pattern < 4; ++pattern) {
        StreamScratch scratch;
        ScratchBuffer convs, delayed;
        StreamConv first(*cpu_, *q_, a, wa, ba, std::nullopt, scratch, convs);
        StreamConv second(*cpu_, *q_, c, wc, bc, std::nullopt, scratch, convs);
        StreamDelay delay(*cpu_, *q_, channels, 5, delayed);
        struct Chain {
            StreamConv &first, &second;
            StreamDelay& delay;
            SignalRef push(gpu::Queue& q, const SignalRef& in, bool flush) {
                return delay.push(q, second.push(q, first.push(q, in, flush), flush), flush);
            }
        } chain{first, second, delay};
        const auto got = stream(chain, x, channels, length, chunks(length), pattern % 2 == 0);
        EXPECT_LE(max_abs_diff(got, want), 1e-5) << "pattern " << pattern;
    }
}

// The delay copies straight from its input into its output, so the two
// must differ.
TEST_F(StreamLayers, delay_refuses_to_write_over_its_input) {
    StreamDelay delay(*cpu_, *q_, 1, 2, out_);
    auto& same = out_.need(*cpu_, 4);
    EXPECT_THROW(delay.push(*q_, {&same, 1, 4}, false), std::invalid_argument);
}

TEST_F(StreamLayers, refuses_shapes_it_cannot_stream) {
    gpu::Conv1dShape s;
    s.kernel = 4;  // even kernel: no symmetric padding
    s.padding = 1;
    EXPECT_FALSE(StreamConv::supports(s));
    s.kernel = 3;
    s.stride = 2;
    EXPECT_FALSE(StreamConv::supports(s));
    gpu::Conv1dShape u;
    u.stride = 4;
    u.kernel = 6;  // kernel - stride is not a whole number of strides
    u.padding = 1;
    EXPECT_FALSE(StreamUpsample::supports(u));
}

}  // namespace
}  // namespace etude::engine
