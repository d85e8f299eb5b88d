// The module's 16-bit samples: at a gain up to 1 exactly `etude say --raw`'s
// conversion; past 1 (speech-dispatcher's volume above 0, Orca's default
// 100) no sample is clipped, and the softer ones are exactly the gain's.
#include "speechd/audio_block.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "audio-io/wav_writer.h"

using etude::speechd::to_pcm16;

TEST(SpeechdAudioBlock, up_to_gain_one_the_samples_are_etude_says) {
    std::vector<float> x;
    for (int i = -1100; i <= 1100; ++i) x.push_back(static_cast<float>(i) / 1000.0f);
    std::vector<short> ours, say;
    to_pcm16(x, 1.0f, ours);
    say.resize(x.size());
    etude::audio_io::float_to_pcm16(x, say);
    EXPECT_EQ(ours, say);
    to_pcm16(x, 0.5f, ours);
    for (std::size_t i = 0; i < x.size(); ++i)
        EXPECT_EQ(ours[i], static_cast<short>(std::lrint(x[i] * 0.5f * 32768.0f))) << x[i];
}

TEST(SpeechdAudioBlock, past_gain_one_peaks_are_eased_not_clipped) {
    std::vector<float> x;
    for (int i = -1000; i <= 1000; ++i) x.push_back(static_cast<float>(i) / 1000.0f);
    std::vector<short> out;
    to_pcm16(x, 2.0f, out);
    int previous = -40000;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float v = x[i] * 2.0f;
        if (std::fabs(v) <= 0.7f) {
            EXPECT_EQ(out[i], static_cast<short>(std::lrint(v * 32768.0f))) << x[i];
        } else {
            // Below full scale, and louder input stays louder (no flat top).
            EXPECT_LT(std::abs(int(out[i])), 32767) << x[i];
        }
        EXPECT_GE(int(out[i]), previous) << x[i];
        previous = out[i];
    }
    // Still rising at the loudest input the voices make at twice the gain.
    EXPECT_GT(out[1000 + 640], out[1000 + 600]);
}
