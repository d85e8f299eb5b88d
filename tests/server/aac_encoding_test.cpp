// The HTTP endpoint's "aac": ADTS frames that an AAC decoder other than
// the encoder's own (FAAD2) decodes, from the first frame or from any
// later one, to the 16-bit samples within the codec's error; sent as they
// are made, never rewritten.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "audio-io/wav_writer.h"
#include "server/aac_encoder.h"
#include "server/audio_encoding.h"
#include "tests/server/codec_error.h"

#ifdef ETUDE_TEST_FAAD
#include <neaacdec.h>
#endif

namespace {

using etude::server::make_audio_encoder;

std::vector<short> speechlike(std::size_t n, int rate) {
    // A gliding tone with a slow envelope, in 16-bit steps.
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double t = static_cast<double>(i) / rate;
        x[i] = static_cast<float>(0.5 * std::sin(2 * M_PI * (180 + 60 * t) * t) *
                                  (0.6 + 0.4 * std::sin(2 * M_PI * 3 * t)));
    }
    std::vector<short> s(n);
    etude::audio_io::float_to_pcm16(x, s);
    return s;
}

struct Encoded {
    std::string bytes;
    std::vector<std::size_t> piece_ends;  // bytes out after each add()
};

Encoded encode(const std::vector<short>& pcm, int rate, std::size_t piece) {
    Encoded e;
    auto enc = make_audio_encoder("aac", [&](std::string_view b) {
        e.bytes.append(b);
        return true;
    });
    EXPECT_TRUE(enc);
    if (!enc) return e;
    EXPECT_TRUE(enc->start(rate));
    EXPECT_STREQ(enc->content_type(), "audio/aac");
    std::vector<float> x(pcm.size());
    for (std::size_t i = 0; i < pcm.size(); ++i) x[i] = pcm[i] / 32768.0f;
    for (std::size_t i = 0; i < x.size(); i += piece) {
        EXPECT_TRUE(enc->add(std::span(x).subspan(i, std::min(piece, x.size() - i))));
        e.piece_ends.push_back(e.bytes.size());
    }
    EXPECT_TRUE(enc->finish());
    return e;
}

// ADTS frames: each starts with the 12-bit sync word and says its length
// (ISO/IEC 14496-3, 1.A.2.2). Returns each frame's offset; fails on a gap.
std::vector<std::size_t> adts_frames(const std::string& s) {
    std::vector<std::size_t> at;
    std::size_t i = 0;
    while (i + 7 <= s.size()) {
        const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
        if (b(0) != 0xFF || (b(1) & 0xF0) != 0xF0) {
            ADD_FAILURE() << "no ADTS sync word at byte " << i;
            return at;
        }
        const std::size_t length = ((b(3) & 0x03u) << 11) | (b(4) << 3) | (b(5) >> 5);
        if (length < 7) {
            ADD_FAILURE() << "ADTS frame of " << length << " bytes at " << i;
            return at;
        }
        // AAC-LC (profile 1 = object type 2), one channel, in every frame.
        if ((b(2) >> 6) != 1 || (((b(2) & 0x01) << 2) | (b(3) >> 6)) != 1) {
            ADD_FAILURE() << "ADTS frame at " << i << " is not mono AAC-LC";
            return at;
        }
        at.push_back(i);
        i += length;
    }
    EXPECT_EQ(i, s.size()) << "the stream ends inside a frame";
    return at;
}

#ifdef ETUDE_TEST_FAAD
// FAAD2 from `from` on: the rate its ADTS header says, and the samples.
// FAAD2 cannot tell plain AAC-LC from HE-AAC whose SBR and PS are implicit
// (signalled only inside the frames), so by default it plays a low rate
// doubled and mono as two channels: it is told not to upsample, and the
// first channel is taken.
std::vector<short> faad_decode(const std::string& bytes, std::size_t from, unsigned long& rate) {
    NeAACDecHandle dec = NeAACDecOpen();
    NeAACDecConfigurationPtr config = NeAACDecGetCurrentConfiguration(dec);
    config->outputFormat = FAAD_FMT_16BIT;
    config->dontUpSampleImplicitSBR = 1;
    NeAACDecSetConfiguration(dec, config);
    auto* data = reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data())) + from;
    unsigned long size = bytes.size() - from;
    unsigned char channels = 0;
    std::vector<short> out;
    const long used = NeAACDecInit(dec, data, size, &rate, &channels);
    EXPECT_GE(used, 0) << "FAAD2 could not read the first ADTS header";
    if (used >= 0) {
        data += used;
        size -= static_cast<unsigned long>(used);
        while (size > 0) {
            NeAACDecFrameInfo info{};
            auto* pcm = static_cast<short*>(NeAACDecDecode(dec, &info, data, size));
            if (info.error) {
                ADD_FAILURE() << "FAAD2: " << NeAACDecGetErrorMessage(info.error);
                break;
            }
            if (info.bytesconsumed == 0) break;
            const unsigned step = info.channels < 1 ? 1 : info.channels;
            if (pcm)
                for (unsigned long i = 0; i < info.samples; i += step) out.push_back(pcm[i]);
            data += info.bytesconsumed;
            size -= info.bytesconsumed;
        }
    }
    NeAACDecClose(dec);
    return out;
}
#endif

bool can_test_aac() {
#ifdef ETUDE_TEST_FAAD
    return etude::server::aac_available();
#else
    return false;
#endif
}

TEST(AacEncoding, is_offered_exactly_where_the_build_has_it) {
    const auto formats = etude::server::audio_formats();
    const bool listed = std::find(formats.begin(), formats.end(), "aac") != formats.end();
    EXPECT_EQ(listed, etude::server::aac_available());
    EXPECT_EQ(static_cast<bool>(make_audio_encoder("aac", [](std::string_view) { return true; })),
              etude::server::aac_available());
    EXPECT_EQ(etude::server::default_audio_rate("aac"), 24000);  // OpenAI's, as mp3 and opus
    EXPECT_EQ(etude::server::audio_rate_problem("aac", 22050), "");
    EXPECT_NE(etude::server::audio_rate_problem("aac", 20000), "");
}

// Measured on this signal (FFmpeg 5.1's encoder at 64 kbit/s, decoded by
// FAAD2 2.10, Debian 12): 16 kHz 40.4 dB, 24 kHz 25.2, 48 kHz 28.5; the
// bound, 12 dB, is far below those and far above what a wrong rate, a lost
// frame or a shift gives (about -3 dB, below 0).
TEST(AacEncoding, adts_frames_decode_to_the_samples_within_the_codec_error) {
    if (!can_test_aac()) GTEST_SKIP() << "this build has no aac, or no FAAD2 to decode it";
    for (int rate : {16000, 24000, 48000}) {
        const auto pcm = speechlike(static_cast<std::size_t>(rate) * 3 / 2, rate);
        const auto e = encode(pcm, rate, 700);  // pieces that are no whole frame
        const auto frames = adts_frames(e.bytes);
        // 1,024 samples a frame, plus the encoder's delay and last frames.
        EXPECT_GE(frames.size(), pcm.size() / 1024) << rate;
        unsigned long got_rate = 0;
        const auto got = faad_decode(e.bytes, 0, got_rate);
        EXPECT_EQ(got_rate, static_cast<unsigned long>(rate));
        EXPECT_GE(got.size(), pcm.size()) << rate;
        const double snr = etude::test::best_snr_db(pcm, got, 4096);
        EXPECT_GT(snr, 12.0) << rate;
        std::printf("aac %d Hz: %zu bytes in %zu frames, %zu samples decoded for %zu, %.1f dB\n",
                    rate, e.bytes.size(), frames.size(), got.size(), pcm.size(), snr);
    }
}

TEST(AacEncoding, audio_goes_out_as_it_is_made_and_decodes_from_any_frame) {
    if (!can_test_aac()) GTEST_SKIP() << "this build has no aac, or no FAAD2 to decode it";
    const int rate = 24000;
    const auto pcm = speechlike(rate * 2, rate);
    const auto e = encode(pcm, rate, 4096);
    // Each piece of 4,096 samples (four frames) sends frames before the
    // next comes: nothing waits for the end.
    ASSERT_GE(e.piece_ends.size(), 3u);
    EXPECT_GT(e.piece_ends[1], e.piece_ends[0]);
    EXPECT_GT(e.piece_ends[2], e.piece_ends[1]);
    // A listener joining at a later frame (ADTS repeats the configuration).
    const auto frames = adts_frames(e.bytes);
    ASSERT_GT(frames.size(), 20u);
    unsigned long got_rate = 0;
    const auto got = faad_decode(e.bytes, frames[20], got_rate);
    EXPECT_EQ(got_rate, static_cast<unsigned long>(rate));
    // Decoding from frame 20 gives the samples from about 19 * 1024 on
    // (the encoder's delay is one frame), the first frame's without its
    // overlap: compared from 22 * 1024, a lag under the search's 4,096.
    const std::vector<short> tail(pcm.begin() + 22 * 1024, pcm.end());
    EXPECT_GT(etude::test::best_snr_db(tail, got, 4096), 10.0);
}

TEST(AacEncoding, a_client_gone_stops_the_encoder) {
    if (!etude::server::aac_available()) GTEST_SKIP() << "this build has no aac";
    const std::vector<float> x(4000, 0.1f);
    int calls = 0;
    auto enc = make_audio_encoder("aac", [&](std::string_view) { return ++calls < 2; });
    bool ok = enc->start(16000);
    for (int i = 0; i < 20 && ok; ++i) ok = enc->add(x);
    EXPECT_FALSE(ok);
}

}  // namespace
