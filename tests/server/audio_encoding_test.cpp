// The HTTP endpoint's audio formats: each made piece by piece decodes to
// exactly the 16-bit samples `etude say` writes, with no seeking back.
#include "server/audio_encoding.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "audio-io/wav_writer.h"

namespace {

using etude::server::make_audio_encoder;

std::vector<float> test_signal(std::size_t n) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)
        x[i] = 0.6f *
               std::sin(0.01f * static_cast<float>(i) * (1.0f + 0.0005f * static_cast<float>(i)));
    return x;
}

std::string encode(const char* format, const std::vector<float>& x, std::size_t piece) {
    std::string out;
    auto enc = make_audio_encoder(format, [&](std::string_view b) {
        out.append(b);
        return true;
    });
    EXPECT_TRUE(enc);
    EXPECT_TRUE(enc->start(16000));
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

TEST(AudioEncoding, unknown_formats_are_refused) {
    EXPECT_FALSE(make_audio_encoder("mp3", [](std::string_view) { return true; }));
    EXPECT_FALSE(make_audio_encoder("", [](std::string_view) { return true; }));
}

TEST(AudioEncoding, a_client_gone_stops_the_encoder) {
    const auto x = test_signal(4000);
    for (const char* format : {"pcm", "wav", "flac"}) {
        int calls = 0;
        auto enc = make_audio_encoder(format, [&](std::string_view) { return ++calls < 2; });
        bool ok = enc->start(16000);
        for (int i = 0; i < 20 && ok; ++i) ok = enc->add(x);
        EXPECT_FALSE(ok) << format;
    }
}

}  // namespace
