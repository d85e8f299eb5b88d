// WavWriter: atomic commit, and outputs too large for WAV's 32-bit sizes
// committed as RF64. The real limit is 4 GiB; these tests lower it so the
// rewrite runs on a few kilobytes (one run past the real limit is recorded
// in docs/troubleshooting.md).
#include "audio-io/wav_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using etude::audio_io::WavFormat;
using etude::audio_io::WavWriter;
namespace fs = std::filesystem;

std::string tmp_path(const std::string& name) {
    const fs::path dir = fs::path(ETUDE_TEST_TMP) / "wav_writer";
    fs::create_directories(dir);
    return (dir / name).string();
}

std::string first_bytes(const std::string& path, std::size_t n) {
    std::ifstream in(path, std::ios::binary);
    std::string s(n, '\0');
    in.read(s.data(), static_cast<std::streamsize>(n));
    s.resize(static_cast<std::size_t>(in.gcount()));
    return s;
}

std::vector<float> ramp(std::size_t n) {
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = 0.9f * std::sin(0.01f * static_cast<float>(i));
    return x;
}

// Nothing but the target itself is left in its folder.
void expect_no_temporaries(const std::string& path) {
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
        EXPECT_FALSE(
            e.path().filename().string().rfind(fs::path(path).filename().string() + ".", 0) == 0)
            << "left behind: " << e.path();
}

void write_and_commit(const std::string& path, WavFormat format, std::uint64_t limit,
                      const std::vector<float>& x) {
    WavWriter w(path, 22050, format, limit);
    // Several writes, as a stream makes them.
    for (std::size_t i = 0; i < x.size(); i += 700)
        w.write(std::span(x).subspan(i, std::min<std::size_t>(700, x.size() - i)));
    w.commit();
}

TEST(WavWriter, an_output_within_the_limit_is_a_plain_wav) {
    const std::string path = tmp_path("plain.wav");
    const auto x = ramp(3000);
    write_and_commit(path, WavFormat::Pcm16, 6000, x);  // exactly at the limit
    EXPECT_EQ(first_bytes(path, 4), "RIFF");
    EXPECT_EQ(fs::file_size(path), 44u + 2 * x.size());  // the canonical 44-byte header
    const auto back = etude::audio_io::read_audio_file(path);
    ASSERT_EQ(back.samples.size(), x.size());
    expect_no_temporaries(path);
}

TEST(WavWriter, an_output_past_the_limit_is_committed_as_rf64_with_every_sample) {
    for (const auto format : {WavFormat::Pcm16, WavFormat::Float32}) {
        const std::string path =
            tmp_path(format == WavFormat::Pcm16 ? "big16.wav" : "bigfloat.wav");
        const auto x = ramp(3001);
        write_and_commit(path, format, 4000, x);
        EXPECT_EQ(first_bytes(path, 4), "RF64");
        const auto back = etude::audio_io::read_audio_file(path);
        EXPECT_EQ(back.sample_rate, 22050);
        ASSERT_EQ(back.samples.size(), x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
            // 16 bits: the writer's own rounding (x 32768, nearest).
            const float want = format == WavFormat::Float32
                                   ? x[i]
                                   : static_cast<float>(std::lrint(x[i] * 32768.0f)) / 32768.0f;
            ASSERT_EQ(back.samples[i], want) << "sample " << i;
        }
        expect_no_temporaries(path);
    }
}

TEST(WavWriter, an_output_not_committed_leaves_nothing) {
    const std::string path = tmp_path("abandoned.wav");
    fs::remove(path);
    {
        WavWriter w(path, 22050, WavFormat::Pcm16, 100);
        w.write(ramp(1000));
    }
    EXPECT_FALSE(fs::exists(path));
    expect_no_temporaries(path);
}

TEST(WavWriter, two_writers_of_one_path_keep_their_own_temporaries) {
    // Both open before either commits (two threads saving one file do this):
    // each must write its own temporary, and the last commit wins whole.
    const std::string path = tmp_path("twice.wav");
    fs::remove(path);
    const auto first = ramp(1500), second = ramp(2500);
    {
        WavWriter a(path, 22050, WavFormat::Float32);
        WavWriter b(path, 22050, WavFormat::Float32);
        a.write(first);
        b.write(second);
        a.commit();
        b.commit();
    }
    const auto back = etude::audio_io::read_audio_file(path);
    ASSERT_EQ(back.samples.size(), second.size());
    for (std::size_t i = 0; i < second.size(); ++i)
        ASSERT_EQ(back.samples[i], second[i]) << "sample " << i;
    expect_no_temporaries(path);
}

TEST(WavWriter, an_unwritable_path_is_named_in_the_error) {
    try {
        WavWriter w("/nonexistent-dir/x.wav", 22050);
        FAIL() << "no error";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("cannot write '/nonexistent-dir/x.wav'"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
