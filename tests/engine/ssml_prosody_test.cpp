// SSML <prosody> and Stream::set_prosody: the attribute values SSML 1.1
// defines, read into factors; a stream speaks each sentence at its rate,
// pitch (built-in voices) and volume.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/piper/espeak_session.h"
#include "engine/ssml_document.h"
#include "support/piper_test_stream.h"
#include "support/stream_output.h"

using namespace etude::engine;
using etude::test::read_all;

namespace {

std::vector<float> ssml(Engine& engine, const StreamOptions& o, const std::string& doc) {
    auto s = engine.create_stream(o);
    s->push_ssml(doc);
    s->end_input();
    return read_all(*s);
}

// The median F0 of the loud 40 ms frames, from each one's autocorrelation
// peak between 60 and 500 Hz.
double median_f0(const std::vector<float>& a, double rate) {
    const std::size_t frame = std::size_t(0.04 * rate);
    double loudest = 0;
    for (float v : a) loudest = std::max(loudest, double(std::fabs(v)));
    std::vector<double> f0s;
    for (std::size_t at = 0; at + frame < a.size(); at += frame / 2) {
        double energy = 0;
        for (std::size_t i = at; i < at + frame; ++i) energy += double(a[i]) * a[i];
        if (std::sqrt(energy / double(frame)) < 0.1 * loudest) continue;
        std::size_t best = 0;
        double best_r = 0;
        for (std::size_t lag = std::size_t(rate / 500); lag <= std::size_t(rate / 60); ++lag) {
            double r = 0;
            for (std::size_t i = at; i + lag < at + frame; ++i) r += double(a[i]) * a[i + lag];
            if (r > best_r) best_r = r, best = lag;
        }
        if (best) f0s.push_back(rate / double(best));
    }
    if (f0s.empty()) return 0;
    std::nth_element(f0s.begin(), f0s.begin() + f0s.size() / 2, f0s.end());
    return f0s[f0s.size() / 2];
}

}  // namespace

TEST(SsmlProsody, attribute_values_are_read_as_ssml_defines_them) {
    EXPECT_FLOAT_EQ(*prosody_rate("x-slow"), 0.5f);
    EXPECT_FLOAT_EQ(*prosody_rate("150%"), 1.5f);
    EXPECT_FLOAT_EQ(*prosody_rate("+20%"), 1.2f);
    EXPECT_FLOAT_EQ(*prosody_rate("-50%"), 0.5f);
    EXPECT_FLOAT_EQ(*prosody_rate("2"), 2.0f);
    EXPECT_FLOAT_EQ(*prosody_rate("default"), 1.0f);
    EXPECT_FALSE(prosody_rate("fastest"));
    EXPECT_FALSE(prosody_rate("-100%"));  // a rate of 0
    EXPECT_FALSE(prosody_rate("+2st"));
    EXPECT_FLOAT_EQ(*prosody_pitch("+12st"), 2.0f);
    EXPECT_NEAR(*prosody_pitch("-2st"), std::pow(2.0, -2.0 / 12.0), 1e-6);
    EXPECT_FLOAT_EQ(*prosody_pitch("+10%"), 1.1f);
    EXPECT_FLOAT_EQ(*prosody_pitch("x-high"), 1.2f);
    EXPECT_FLOAT_EQ(*prosody_pitch("+36st"), 2.0f);  // clamped
    EXPECT_FALSE(prosody_pitch("200Hz"));            // needs the voice's own F0
    EXPECT_FLOAT_EQ(*prosody_volume("soft"), 0.5f);
    EXPECT_FLOAT_EQ(*prosody_volume("silent"), 0.0f);
    EXPECT_NEAR(*prosody_volume("+6dB"), std::pow(10.0, 6.0 / 20.0), 1e-6);
    EXPECT_FLOAT_EQ(*prosody_volume("50"), 0.5f);  // SSML 1.0's 0..100
    EXPECT_FLOAT_EQ(*prosody_volume("-25%"), 0.75f);
    EXPECT_FALSE(prosody_volume("150"));
    EXPECT_FALSE(prosody_volume("loudest"));
}

TEST(SsmlProsody, nested_elements_multiply_and_text_splits_where_prosody_changes) {
    const auto pieces = parse_message(
        "<speak>Plain <prosody rate=\"fast\" volume=\"soft\">quick <prosody rate=\"200%\" "
        "pitch=\"nonsense\">quicker</prosody></prosody> plain again</speak>");
    ASSERT_EQ(pieces.size(), 4u);
    EXPECT_EQ(pieces[0].text, "Plain ");
    EXPECT_EQ(pieces[0].prosody, Prosody{});
    EXPECT_EQ(pieces[1].text, "quick ");
    EXPECT_FLOAT_EQ(pieces[1].prosody.rate, 1.5f);
    EXPECT_FLOAT_EQ(pieces[1].prosody.volume, 0.5f);
    EXPECT_EQ(pieces[2].text, "quicker");
    EXPECT_FLOAT_EQ(pieces[2].prosody.rate, 3.0f);
    EXPECT_FLOAT_EQ(pieces[2].prosody.pitch, 1.0f);  // a value it cannot read is ignored
    EXPECT_FLOAT_EQ(pieces[2].prosody.volume, 0.5f);
    EXPECT_EQ(pieces[3].text, " plain again");
    EXPECT_EQ(pieces[3].prosody, Prosody{});
}

TEST(SsmlProsody, volume_scales_the_audio_exactly_and_rate_and_pitch_change_it) {
    Engine engine;
    StreamOptions o;  // slt, 16 kHz
    const std::string text = "The lights are off in the house.";
    const auto plain = ssml(engine, o, "<speak>" + text + "</speak>");
    const auto soft =
        ssml(engine, o, "<speak><prosody volume=\"soft\">" + text + "</prosody></speak>");
    ASSERT_EQ(soft.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(soft[i], plain[i] * 0.5f) << i;

    const auto slow =
        ssml(engine, o, "<speak><prosody rate=\"x-slow\">" + text + "</prosody></speak>");
    const auto fast =
        ssml(engine, o, "<speak><prosody rate=\"x-fast\">" + text + "</prosody></speak>");
    EXPECT_GT(double(slow.size()), 1.6 * double(plain.size()));
    EXPECT_LT(double(fast.size()), 0.7 * double(plain.size()));

    const auto high =
        ssml(engine, o, "<speak><prosody pitch=\"+12st\">" + text + "</prosody></speak>");
    EXPECT_EQ(high.size(), plain.size());  // the same frames, another F0
    const double f0 = median_f0(plain, 16000), f0_high = median_f0(high, 16000);
    EXPECT_GT(f0, 120);
    EXPECT_NEAR(f0_high / f0, 2.0, 0.25) << f0 << " Hz -> " << f0_high << " Hz";
}

TEST(SsmlProsody, set_prosody_holds_for_later_text_and_ssml_applies_within_it) {
    Engine engine;
    StreamOptions o;
    const auto plain = ssml(engine, o, "<speak>One. Two.</speak>");
    auto s = engine.create_stream(o);
    s->set_prosody({.volume = 2.0f});
    s->push_ssml("<speak>One. <prosody volume=\"soft\">Two.</prosody></speak>");
    s->set_prosody({});
    s->end_input();
    const auto got = read_all(*s);
    ASSERT_EQ(got.size(), plain.size());
    // "One." twice as loud, "Two." at 2 x 0.5: as plain. Where one ends is
    // where the plain stream's first sentence ends.
    auto first = engine.create_stream(o);
    first->push_text("One.");
    first->end_input();
    const std::size_t split = read_all(*first).size();
    for (std::size_t i = 0; i < split; ++i) ASSERT_EQ(got[i], plain[i] * 2.0f) << i;
    for (std::size_t i = split; i < plain.size(); ++i) ASSERT_EQ(got[i], plain[i]) << i;

    EXPECT_THROW(s->set_prosody({.rate = 0.0f}), etude::Error);
    EXPECT_THROW(s->set_prosody({.pitch = 3.0f}), etude::Error);
    EXPECT_THROW(s->set_prosody({.range = 4.5f}), etude::Error);
    EXPECT_THROW(s->set_prosody({.volume = NAN}), etude::Error);
}

TEST(SsmlProsody, a_piper_voice_takes_rate_and_volume) {
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng (ETUDE_WITH_ESPEAK=OFF)";
    Engine engine;
    StreamOptions o = etude::test::piper_test_stream(9);
    const std::string text = "The boats came home at night.";
    const auto plain = ssml(engine, o, "<speak>" + text + "</speak>");
    const auto loud =
        ssml(engine, o, "<speak><prosody volume=\"x-loud\">" + text + "</prosody></speak>");
    ASSERT_EQ(loud.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(loud[i], plain[i] * 2.0f) << i;
    const auto fast =
        ssml(engine, o, "<speak><prosody rate=\"x-fast\">" + text + "</prosody></speak>");
    EXPECT_LT(double(fast.size()), 0.7 * double(plain.size()));
}

// A mark, a break or a prosody change between the bytes of one character
// would split it: refused with the reason, and the stream goes on as if the
// call had not been made.
TEST(SsmlProsody, a_split_character_is_refused_and_nothing_changes) {
    Engine engine;
    StreamOptions o;
    auto want = engine.create_stream(o);
    want->push_text("Caf\xC3\xA9 open.");
    want->end_input();
    std::vector<float> expected = read_all(*want);

    auto s = engine.create_stream(o);
    s->push_text("Caf\xC3");
    EXPECT_THROW(s->set_prosody({.volume = 2.0f}), etude::Error);
    EXPECT_THROW(s->push_mark("m"), etude::Error);
    EXPECT_THROW(s->push_break(100), etude::Error);
    s->push_text("\xA9 open.");
    s->end_input();
    EXPECT_EQ(read_all(*s), expected);
    SpeechMark m;
    EXPECT_FALSE(s->next_mark(m));
}

// <prosody range=>: each voiced frame's distance from the voiced mean
// scaled, the mean kept (then the pitch moves all of it); unvoiced frames
// stay 0, and a wide range keeps every frame voiced.
TEST(SsmlProsody, range_scales_the_f0_about_its_mean_and_pitch_moves_it) {
    EXPECT_FLOAT_EQ(*prosody_range("x-low"), 0.25f);
    EXPECT_FLOAT_EQ(*prosody_range("+50%"), 1.5f);
    EXPECT_NEAR(*prosody_range("-12st"), 0.5, 1e-6);
    EXPECT_FALSE(prosody_range("40Hz"));
    std::vector<float> f0{0, 100, 200, 0, 300};  // voiced mean 200
    shape_f0(f0, {.range = 0.5f});
    EXPECT_EQ(f0, (std::vector<float>{0, 150, 200, 0, 250}));
    shape_f0(f0, {.pitch = 2.0f});
    EXPECT_EQ(f0, (std::vector<float>{0, 300, 400, 0, 500}));
    std::vector<float> flat{0, 100, 200, 300};
    shape_f0(flat, {.range = 0.0f});
    EXPECT_EQ(flat, (std::vector<float>{0, 200, 200, 200}));  // monotone
    std::vector<float> wide{100, 300};
    shape_f0(wide, {.range = 4.0f});
    EXPECT_EQ(wide, (std::vector<float>{50, 600}));  // 200 - 400 held at a quarter of the mean
    const auto pieces = parse_message("<speak><prosody range=\"x-high\">Wide.</prosody></speak>");
    ASSERT_EQ(pieces.size(), 1u);
    EXPECT_FLOAT_EQ(pieces[0].prosody.range, 2.0f);

    // Through a stream: the same frames (same length), another F0 track.
    Engine engine;
    StreamOptions o;
    const auto plain = ssml(engine, o, "<speak>The lights are off.</speak>");
    const auto flat_audio =
        ssml(engine, o, "<speak><prosody range=\"-100%\">The lights are off.</prosody></speak>");
    EXPECT_EQ(flat_audio.size(), plain.size());
    EXPECT_NE(flat_audio, plain);
}
