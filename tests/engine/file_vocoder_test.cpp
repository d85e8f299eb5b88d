// engine/file_vocoder.h on the CPU: a mel pushed in uneven chunks gives
// PyTorch's audio of the whole mel (tests/data/neural/hifigan_v1_out.npy,
// made by the original network), and log_mel() gives the model's bands
// about once per hop.
#include "engine/file_vocoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "audio-io/npy_file.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace {

const std::string kData = etude::test::test_data_dir() + "/neural/";

}  // namespace

TEST(FileVocoder, chunks_of_any_size_give_pytorchs_audio_of_the_whole_mel) {
    const auto mel = etude::audio_io::read_npy(kData + "hifigan_v1_mel.npy");
    const auto want = etude::audio_io::read_npy(kData + "hifigan_v1_out.npy").data;
    ASSERT_EQ(mel.shape.size(), 2u);
    const int frames = static_cast<int>(mel.shape[1]);
    int failures = 0;
    etude::engine::FileVocoder vocoder(kData + "hifigan_v1.lef", "cpu", -1,
                                       [&](const std::string&, bool) { ++failures; });
    EXPECT_EQ(vocoder.model().architecture, "hifigan");
    EXPECT_EQ(static_cast<std::size_t>(vocoder.model().n_mels), mel.shape[0]);
    EXPECT_EQ(vocoder.where(), "CPU (the CPU backend was requested)");
    std::vector<float> audio;
    for (int first = 0, step = 1; first < frames; first += step, step = step % 7 + 3) {
        const int count = std::min(step, frames - first);
        const auto part = vocoder.push(mel.data, frames, first, count);
        audio.insert(audio.end(), part.begin(), part.end());
    }
    const auto rest = vocoder.finish();
    audio.insert(audio.end(), rest.begin(), rest.end());
    ASSERT_EQ(audio.size(), want.size());
    EXPECT_LE(etude::test::max_abs_diff(audio, want), 1e-4);
    EXPECT_EQ(failures, 0);
}

TEST(FileVocoder, log_mel_gives_the_models_bands_about_once_per_hop) {
    // The hop, from the reference data: PyTorch's audio holds `hop` samples
    // per mel frame.
    const auto mel = etude::audio_io::read_npy(kData + "hifigan_v1_mel.npy");
    const auto audio = etude::audio_io::read_npy(kData + "hifigan_v1_out.npy").data;
    const std::size_t hop = audio.size() / mel.shape[1];
    etude::engine::FileVocoder vocoder(kData + "hifigan_v1.lef", "cpu", -1,
                                       [](const std::string&, bool) {});
    const std::vector<float> second(static_cast<std::size_t>(vocoder.model().sample_rate), 0.1f);
    std::size_t frames = 0;
    const auto log_mel = vocoder.log_mel(second, frames);
    EXPECT_NEAR(static_cast<double>(frames), static_cast<double>(second.size()) / hop, 1.0);
    EXPECT_EQ(log_mel.size(), frames * mel.shape[0]);
}
