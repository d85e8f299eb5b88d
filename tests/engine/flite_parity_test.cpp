// Our MLSA vocoder must reproduce the waveform Flite's own vocoder makes from
// the same acoustic parameters and the same excitation noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "engine/voices/flite_voice.h"

namespace {

using etude::engine::AcousticFrames;
using etude::engine::FliteVoice;

struct ParityResult {
    std::size_t samples = 0;
    double max_abs_diff = 0;  // in 16-bit steps, after truncation as Flite does
    std::size_t over_one_step = 0;
    double reference_rms = 0;
};

ParityResult compare_with_flite(const std::string& voice_name, const std::string& text) {
    const auto& voice = FliteVoice::load(voice_name);
    constexpr unsigned kSeed = 1234;
    AcousticFrames frames;
    const std::vector<short> reference = voice.reference_waveform(text, kSeed, &frames);

    // Flite draws one +-1 value from rand() per output sample; replay that sequence.
    const auto& cfg = voice.vocoder_config();
    std::srand(kSeed);
    std::vector<float> noise(frames.frames * cfg.frame_period);
    for (auto& n : noise) n = std::rand() > RAND_MAX / 2.0 ? 1.0f : -1.0f;

    etude::dsp::MlsaVocoder vocoder(cfg);
    std::vector<double> ours;
    std::vector<double> block(cfg.frame_period);
    std::size_t noise_pos = 0;
    for (std::size_t f = 0; f < frames.frames; ++f) {
        const std::size_t n = vocoder.synthesize_frame(
            frames.f0[f], std::span(frames.mcep).subspan(f * frames.mcep_order, frames.mcep_order),
            std::span(frames.strengths).subspan(f * frames.bands, frames.bands),
            std::span(noise).subspan(noise_pos, cfg.frame_period), block);
        noise_pos += n;
        ours.insert(ours.end(), block.begin(), block.begin() + static_cast<long>(n));
    }

    EXPECT_EQ(ours.size(), reference.size());
    ParityResult r;
    r.samples = std::min(ours.size(), reference.size());
    double energy = 0;
    for (std::size_t i = 0; i < r.samples; ++i) {
        const double d = std::abs(std::trunc(ours[i]) - reference[i]);
        r.max_abs_diff = std::max(r.max_abs_diff, d);
        r.over_one_step += d > 1.0;
        energy += double(reference[i]) * reference[i];
    }
    r.reference_rms = std::sqrt(energy / std::max<std::size_t>(r.samples, 1));
    return r;
}

TEST(FliteParity, mlsa_vocoder_reproduces_flite_waveform_within_one_16bit_step) {
    for (const char* voice : {"slt", "rms", "awb"}) {
        const auto r = compare_with_flite(
            voice, "The quick brown fox jumps over the lazy dog, twice in 2024.");
        RecordProperty(std::string(voice) + "_max_abs_diff", std::to_string(r.max_abs_diff));
        EXPECT_GT(r.samples, 16000u) << voice;       // about two seconds of speech
        EXPECT_GT(r.reference_rms, 300.0) << voice;  // the reference is real speech
        EXPECT_LE(r.max_abs_diff, 1.0) << voice;     // within one 16-bit step
        std::printf("[parity] voice %s: %zu samples, max |ours - flite| = %.0f step(s), rms %.0f\n",
                    voice, r.samples, r.max_abs_diff, r.reference_rms);
    }
}

}  // namespace
