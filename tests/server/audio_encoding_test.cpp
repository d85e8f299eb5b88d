// The HTTP endpoint's audio formats: each made piece by piece decodes to
// exactly the 16-bit samples `etude say` writes (MP3 and Opus: within their
// codec's error), with no seeking back.
#include "server/audio_encoding.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "audio-io/wav_writer.h"
#include "tests/server/codec_error.h"

namespace {

using etude::server::make_audio_encoder;

std::vector<float> test_signal(std::size_t n) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)
        x[i] = 0.6f *
               std::sin(0.01f * static_cast<float>(i) * (1.0f + 0.0005f * static_cast<float>(i)));
    return x;
}

std::string encode(const char* format, const std::vector<float>& x, std::size_t piece,
                   int rate = 16000) {
    std::string out;
    auto enc = make_audio_encoder(format, [&](std::string_view b) {
        out.append(b);
        return true;
    });
    EXPECT_TRUE(enc);
    EXPECT_TRUE(enc->start(rate));
    for (std::size_t i = 0; i < x.size(); i += piece)
        EXPECT_TRUE(enc->add(std::span(x).subspan(i, std::min(piece, x.size() - i))));
    EXPECT_TRUE(enc->finish());
    return out;
}

std::vector<short> pcm16(const std::vector<float>& x) {
    std::vector<short> s(x.size());
    etude::audio_io::float_to_pcm16(x, s);
    return s;
}

// Reads a whole in-memory sound file through libsndfile.
std::vector<short> decode(const std::string& bytes, int& rate) {
    struct Memory {
        const std::string& b;
        sf_count_t pos = 0;
    } mem{bytes};
    SF_VIRTUAL_IO io{};
    io.get_filelen = [](void* m) {
        return static_cast<sf_count_t>(static_cast<Memory*>(m)->b.size());
    };
    io.seek = [](sf_count_t off, int whence, void* p) {
        auto* m = static_cast<Memory*>(p);
        m->pos = (whence == SEEK_SET   ? 0
                  : whence == SEEK_CUR ? m->pos
                                       : sf_count_t(m->b.size())) +
                 off;
        return m->pos;
    };
    io.read = [](void* dst, sf_count_t n, void* p) {
        auto* m = static_cast<Memory*>(p);
        const sf_count_t k =
            std::max<sf_count_t>(0, std::min<sf_count_t>(n, sf_count_t(m->b.size()) - m->pos));
        std::memcpy(dst, m->b.data() + m->pos, static_cast<std::size_t>(k));
        m->pos += k;
        return k;
    };
    io.write = [](const void*, sf_count_t, void*) -> sf_count_t { return 0; };
    io.tell = [](void* p) { return static_cast<Memory*>(p)->pos; };
    SF_INFO info{};
    SNDFILE* f = sf_open_virtual(&io, SFM_READ, &info, &mem);
    EXPECT_TRUE(f) << sf_strerror(nullptr);
    if (!f) return {};
    rate = info.samplerate;
    std::vector<short> out;
    short buf[4096];
    sf_count_t n;
    while ((n = sf_read_short(f, buf, 4096)) > 0) out.insert(out.end(), buf, buf + n);
    sf_close(f);
    return out;
}

TEST(AudioEncoding, pcm_is_the_16_bit_samples) {
    const auto x = test_signal(10000);
    const auto bytes = encode("pcm", x, 333);
    const auto want = pcm16(x);
    ASSERT_EQ(bytes.size(), want.size() * 2);
    EXPECT_EQ(std::memcmp(bytes.data(), want.data(), bytes.size()), 0);
}

TEST(AudioEncoding, streamed_wav_is_a_header_then_the_samples) {
    const auto x = test_signal(10000);
    const auto bytes = encode("wav", x, 500);
    ASSERT_EQ(bytes.size(), 44 + x.size() * 2);
    EXPECT_EQ(bytes.substr(0, 4), "RIFF");
    EXPECT_EQ(bytes.substr(8, 8), "WAVEfmt ");
    EXPECT_EQ(bytes.substr(36, 4), "data");
    const auto want = pcm16(x);
    EXPECT_EQ(std::memcmp(bytes.data() + 44, want.data(), want.size() * 2), 0);
}

TEST(AudioEncoding, streamed_flac_decodes_to_the_same_samples) {
    const auto x = test_signal(40000);
    const auto bytes = encode("flac", x, 1024);
    EXPECT_EQ(bytes.substr(0, 4), "fLaC");
    EXPECT_LT(bytes.size(), x.size() * 2);  // it compressed
    int rate = 0;
    const auto got = decode(bytes, rate);
    EXPECT_EQ(rate, 16000);
    EXPECT_EQ(got, pcm16(x));
}

// Bounds in dB, measured on this sweep and set well below: MP3 (constant
// 80 kbit/s at 24 kHz) 26.0; Opus (libopus's default rate) 10.7 at 24 kHz
// and 32.5 at 48 kHz. A wrong rate, a lost piece or a shift leaves about 0.
TEST(AudioEncoding, streamed_mp3_decodes_to_the_samples_within_the_codec_error) {
    const auto x = test_signal(40000);
    const auto bytes = encode("mp3", x, 1024, 24000);
    int rate = 0;
    const auto got = decode(bytes, rate);
    EXPECT_EQ(rate, 24000);
    EXPECT_GE(got.size(), x.size());
    const double snr = etude::test::best_snr_db(pcm16(x), got, 3000);
    EXPECT_GT(snr, 20.0);
    std::printf("mp3: %zu bytes, %zu samples decoded for %zu, %.1f dB\n", bytes.size(), got.size(),
                x.size(), snr);
}

TEST(AudioEncoding, streamed_opus_decodes_to_the_samples_within_the_codec_error) {
    const auto x = test_signal(40000);
    for (int r : {24000, 48000}) {
        const auto bytes = encode("opus", x, 1024, r);
        EXPECT_EQ(bytes.substr(0, 4), "OggS");
        EXPECT_NE(bytes.find("OpusHead"), std::string::npos);
        int rate = 0;
        const auto got = decode(bytes, rate);
        EXPECT_EQ(rate, r);
        const double snr = etude::test::best_snr_db(pcm16(x), got, 3000);
        EXPECT_GT(snr, r == 48000 ? 25.0 : 8.0) << r;
        std::printf("opus %d Hz: %zu bytes, %zu samples decoded for %zu, %.1f dB\n", r,
                    bytes.size(), got.size(), x.size(), snr);
    }
}

TEST(AudioEncoding, rates_each_codec_cannot_make_are_named) {
    using etude::server::audio_rate_problem;
    EXPECT_EQ(audio_rate_problem("opus", 48000), "");
    EXPECT_NE(audio_rate_problem("opus", 22050), "");
    EXPECT_EQ(audio_rate_problem("mp3", 22050), "");
    EXPECT_NE(audio_rate_problem("mp3", 96000), "");
    EXPECT_EQ(audio_rate_problem("wav", 96000), "");
    EXPECT_NE(audio_rate_problem("pcm", 4000), "");
    EXPECT_EQ(etude::server::default_audio_rate("pcm"), 24000);
    EXPECT_EQ(etude::server::default_audio_rate("mp3"), 24000);
    EXPECT_FALSE(etude::server::default_audio_rate("wav"));
}

TEST(AudioEncoding, unknown_formats_are_refused) {
    EXPECT_FALSE(make_audio_encoder("aiff", [](std::string_view) { return true; }));
    EXPECT_FALSE(make_audio_encoder("", [](std::string_view) { return true; }));
}

TEST(AudioEncoding, a_client_gone_stops_the_encoder) {
    const auto x = test_signal(4000);
    for (const char* format : {"pcm", "wav", "flac", "mp3", "opus"}) {
        int calls = 0;
        auto enc = make_audio_encoder(format, [&](std::string_view) { return ++calls < 2; });
        bool ok = enc->start(16000);
        for (int i = 0; i < 20 && ok; ++i) ok = enc->add(x);
        EXPECT_FALSE(ok) << format;
    }
}

}  // namespace
