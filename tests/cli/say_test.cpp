// `etude say` end to end: speech of plausible length and level, and every
// bad input gets a one-line error, a non-zero status and no file left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "audio-io/npy_file.h"
#include "support/cli_runner.h"
#include "support/wav_file.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::slurp;
using etude::test::tmpdir;

using Wav = etude::test::WavFile<short>;
const auto read_wav = etude::test::read_wav<short>;

double rms(const std::vector<short>& x) {
    double e = 0;
    for (short v : x) e += double(v) * v;
    return x.empty() ? 0 : std::sqrt(e / x.size()) / 32768.0;
}

int count_lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

bool no_files_like(const fs::path& target) {
    for (const auto& e : fs::directory_iterator(target.parent_path()))
        if (e.path().filename().string().rfind(target.filename().string(), 0) == 0) return false;
    return true;
}

// Expect a failure with a single-line message that mentions `needle`.
void expect_clean_error(const CliRun& r, const std::string& needle, int status = 1) {
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

constexpr const char* kSentence = "The quick brown fox jumps over the lazy dog.";

}  // namespace

TEST(CliSay, writes_a_wav_of_plausible_duration_and_level) {
    const fs::path wav = tmpdir() / "fox.wav";
    const CliRun r = run_etude("say " + quote(kSentence) + " -o " + wav.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const Wav w = read_wav(wav);
    EXPECT_EQ(w.rate, 16000);
    const double seconds = double(w.samples.size()) / w.rate;
    EXPECT_GT(seconds, 1.5);
    EXPECT_LT(seconds, 5.0);
    EXPECT_GT(rms(w.samples), 0.02);
    EXPECT_TRUE(no_files_like(tmpdir() / "fox.wav.partial"));
}

TEST(CliSay, reads_text_from_stdin_and_honours_rate_and_voice) {
    const fs::path wav = tmpdir() / "rms48.wav";
    const CliRun r = run_etude("say --voice rms --rate 48000 -o " + wav.string(), kSentence);
    ASSERT_EQ(r.status, 0) << r.err;
    const Wav w = read_wav(wav);
    EXPECT_EQ(w.rate, 48000);
    EXPECT_GT(double(w.samples.size()) / w.rate, 1.5);
    EXPECT_GT(rms(w.samples), 0.02);
}

TEST(CliSay, raw_output_equals_the_wav_samples) {
    const fs::path wav = tmpdir() / "same.wav";
    ASSERT_EQ(run_etude("say " + quote(kSentence) + " -o " + wav.string()).status, 0);
    const CliRun raw = run_etude("say --raw " + quote(kSentence));
    ASSERT_EQ(raw.status, 0) << raw.err;
    const Wav w = read_wav(wav);
    ASSERT_EQ(raw.out.size(), w.samples.size() * 2);
    EXPECT_EQ(std::memcmp(raw.out.data(), w.samples.data(), raw.out.size()), 0);
}

TEST(CliSay, digits_abbreviations_and_punctuation_runs_are_spoken) {
    const fs::path wav = tmpdir() / "odd.wav";
    const CliRun r =
        run_etude("say -o " + wav.string(),
                  "Dr. Smith paid $3.50 on 12/25/2024 at 5:30 p.m.!!! Really??? ... ok -- "
                  "call 555-0100, ext. 42; (see Fig. 7)");
    ASSERT_EQ(r.status, 0) << r.err;
    const Wav w = read_wav(wav);
    EXPECT_GT(double(w.samples.size()) / w.rate, 6.0);
    EXPECT_GT(rms(w.samples), 0.02);
}

TEST(CliSay, empty_and_whitespace_text_are_rejected) {
    const fs::path wav = tmpdir() / "empty.wav";
    expect_clean_error(run_etude("say -o " + wav.string(), ""), "no text to speak");
    expect_clean_error(run_etude("say -o " + wav.string(), "  \n\t \n"), "no text to speak");
    expect_clean_error(run_etude("say '   ' -o " + wav.string()), "no text to speak");
    EXPECT_TRUE(no_files_like(wav));
}

TEST(CliSay, invalid_utf8_is_rejected_with_its_offset) {
    const fs::path wav = tmpdir() / "utf8.wav";
    expect_clean_error(run_etude("say -o " + wav.string(), "fine text \xC3\x28 broken"),
                       "not valid UTF-8 (at byte offset 10: a character cut short)");
    EXPECT_TRUE(no_files_like(wav));
}

TEST(CliSay, unknown_voice_names_the_choices) {
    const fs::path wav = tmpdir() / "voice.wav";
    expect_clean_error(run_etude("say hi --voice kal -o " + wav.string()),
                       "unknown voice 'kal' (choose one of: slt, rms, awb)");
    EXPECT_TRUE(no_files_like(wav));
}

TEST(CliSay, output_rate_outside_8_to_192_khz_is_rejected) {
    const fs::path wav = tmpdir() / "rate.wav";
    expect_clean_error(run_etude("say hi --rate 7999 -o " + wav.string()), "8000-192000");
    expect_clean_error(run_etude("say hi --rate 192001 -o " + wav.string()), "8000-192000");
    expect_clean_error(run_etude("say hi --rate fast -o " + wav.string()), "expects a number", 2);
    EXPECT_TRUE(no_files_like(wav));
}

TEST(CliSay, unwritable_output_path_fails_cleanly) {
    expect_clean_error(run_etude("say hi -o /nonexistent-dir/out.wav"),
                       "cannot write '/nonexistent-dir/out.wav'");
    const fs::path ro = tmpdir() / "readonly";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0555);
    const CliRun r = run_etude("say hi -o " + (ro / "out.wav").string());
    if (::geteuid() == 0) {
        // root ignores directory permissions; the write must then simply work
        EXPECT_EQ(r.status, 0) << r.err;
    } else {
        expect_clean_error(r, "cannot write");
        EXPECT_TRUE(fs::is_empty(ro));
    }
    ::chmod(ro.c_str(), 0755);
    // A directory given as the output file.
    expect_clean_error(run_etude("say hi -o " + tmpdir().string()), "cannot write");
}

// The trace is checked before speaking: no audio file is left by a run whose
// trace could never be written, and the error says why.
TEST(CliSay, unwritable_trace_path_fails_before_speaking) {
    const fs::path wav = tmpdir() / "traced.wav";
    expect_clean_error(
        run_etude("say hi --trace /nonexistent-dir/t.json -o " + wav.string()),
        "cannot write trace file '/nonexistent-dir/t.json': No such file or directory");
    EXPECT_TRUE(no_files_like(wav));
    const fs::path trace = tmpdir() / "trace.json";
    fs::remove(trace);
    const CliRun r = run_etude("say hi --trace " + trace.string() + " -o " +
                               (tmpdir() / "traced_ok.wav").string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(trace));
    EXPECT_TRUE(no_files_like(trace.string() + ".partial"));
}

TEST(CliSay, usage_errors_exit_with_status_2) {
    EXPECT_EQ(run_etude("say hi --bogus").status, 2);
    EXPECT_EQ(run_etude("say hi -o").status, 2);
    EXPECT_EQ(run_etude("frobnicate").status, 2);
}

TEST(CliSay, every_subcommand_has_help) {
    for (const char* cmd : {"--help", "say --help", "voices --help", "devices --help",
                            "bench --help", "info --help", "vocode --help", "resynth --help"}) {
        const CliRun r = run_etude(cmd);
        EXPECT_EQ(r.status, 0) << cmd;
        EXPECT_NE(r.out.find("usage: etude"), std::string::npos) << cmd;
    }
}

TEST(CliSay, a_one_megabyte_text_streams_from_the_first_sentence) {
    // 1 MiB of prose would take hours to speak; what matters is that audio
    // starts at once and memory does not grow with the text. Read the first
    // 3 seconds from the pipe, then close it: etude must stop cleanly.
    std::string text;
    const std::string para =
        "It was a bright cold day in April, and the clocks were striking thirteen. ";
    while (text.size() < (1u << 20)) text += para;
    const fs::path in = tmpdir() / "big.txt";
    std::ofstream(in) << text;
    const fs::path err = tmpdir() / "big.err";
    const std::string cmd = "/usr/bin/time -f 'maxrss_kb=%M' " + std::string(ETUDE_CLI_PATH) +
                            " say --raw < " + in.string() + " 2> " + err.string() +
                            " | head -c 96000 | wc -c";
    const auto t0 = std::chrono::steady_clock::now();
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[64] = {};
    ASSERT_NE(std::fgets(buf, sizeof buf, p), nullptr);
    const int rc = ::pclose(p);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(std::stoul(buf), 96000u);
    EXPECT_EQ(WEXITSTATUS(rc), 0);
    EXPECT_LT(secs, 30.0);  // far less than analysing 1 MiB of text would take
    const std::string e = slurp(err);
    EXPECT_NE(e.find("standard output was closed"), std::string::npos) << e;
    const auto at = e.find("maxrss_kb=");
    if (at != std::string::npos) {
        EXPECT_LT(std::stol(e.substr(at + 10)), 200 * 1024)
            << e;  // bounded, not proportional to the text
    }
}

TEST(CliSay, play_without_a_matching_device_fails_cleanly_and_keeps_no_file) {
    const fs::path wav = tmpdir() / "play.wav";
    const CliRun r = run_etude("say hi --play --device no-such-device-xyz -o " + wav.string());
    expect_clean_error(r, "no audio output device matches 'no-such-device-xyz'");
    EXPECT_TRUE(no_files_like(wav));
}

TEST(CliInfo, validates_a_model_file_and_names_the_problem) {
    // A damaged file: one error line naming the problem, status 1.
    const fs::path bad = tmpdir() / "bad.lef";
    std::ofstream(bad, std::ios::binary) << "LIBETUDE but not much else";
    expect_clean_error(run_etude("info " + bad.string()), "too short for a LEF header");
    expect_clean_error(run_etude("info " + (tmpdir() / "missing.lef").string()),
                       "cannot open model");
    EXPECT_EQ(run_etude("info").status, 2);
}

// ---- etude vocode / resynth ------------------------------------------------

namespace {
const std::string kNeural = ETUDE_TEST_DATA "/neural/";
const auto read_wav_float = etude::test::read_wav<float>;
}  // namespace

TEST(CliVocode, float_output_matches_pytorch_reference) {
    for (const char* name : {"hifigan_v3", "vocos"}) {
        const fs::path wav = tmpdir() / (std::string(name) + ".wav");
        const CliRun r = run_etude("vocode --model " + kNeural + name + ".lef --mel " + kNeural +
                                   name + "_mel.npy --float --chunk 5 -o " + wav.string());
        ASSERT_EQ(r.status, 0) << r.err;
        const auto file = read_wav_float(wav);
        const auto& got = file.samples;
        const auto want = etude::audio_io::read_npy(kNeural + name + "_out.npy").data;
        EXPECT_EQ(file.rate, std::string(name) == "vocos" ? 24000 : 22050);
        ASSERT_EQ(got.size(), want.size()) << name;
        double diff = 0;
        for (std::size_t i = 0; i < got.size(); ++i)
            diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
        EXPECT_LE(diff, 1e-4) << name;
    }
}

// --rate resamples as the audio streams out to the file: any chunk size
// gives the same samples, as many as the duration at the new rate.
TEST(CliVocode, resampled_output_streams_to_the_file) {
    const std::string base = "vocode --model " + kNeural + "hifigan_v3.lef --mel " + kNeural +
                             "hifigan_v3_mel.npy --float ";
    const fs::path native = tmpdir() / "v3_native.wav", a = tmpdir() / "v3_48k_a.wav",
                   b = tmpdir() / "v3_48k_b.wav";
    ASSERT_EQ(run_etude(base + "-o " + native.string()).status, 0);
    ASSERT_EQ(run_etude(base + "--rate 48000 --chunk 3 -o " + a.string()).status, 0);
    ASSERT_EQ(run_etude(base + "--rate 48000 -o " + b.string()).status, 0);
    const auto file_a = read_wav_float(a), file_b = read_wav_float(b);
    const auto x = read_wav_float(native).samples;
    const auto &ya = file_a.samples, &yb = file_b.samples;
    EXPECT_EQ(file_a.rate, 48000);
    EXPECT_EQ(file_b.rate, 48000);
    ASSERT_FALSE(x.empty());
    EXPECT_NEAR(static_cast<double>(ya.size()), x.size() * 48000.0 / 22050.0, 2.0);
    ASSERT_EQ(ya.size(), yb.size());
    double diff = 0, peak = 0;
    for (std::size_t i = 0; i < ya.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(ya[i]) - yb[i]));
        peak = std::max(peak, std::abs(static_cast<double>(yb[i])));
    }
    EXPECT_LE(diff, 1e-4);
    EXPECT_GT(peak, 1e-3);  // not silence
}

TEST(CliVocode, resynth_gives_audio_of_the_input_length) {
    const fs::path speech = tmpdir() / "resynth_in.wav", out = tmpdir() / "resynth_out.wav",
                   mel = tmpdir() / "resynth_mel.npy";
    ASSERT_EQ(run_etude("say " + quote(kSentence) + " --rate 16000 -o " + speech.string()).status,
              0);
    const CliRun r = run_etude("resynth " + speech.string() + " --model " + kNeural +
                               "vocos.lef --mel-out " + mel.string() + " -o " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const Wav in = read_wav(speech), res = read_wav(out);
    EXPECT_EQ(res.rate, 24000);
    // The same duration (resampled 16 -> 24 kHz), within one hop.
    EXPECT_NEAR(static_cast<double>(res.samples.size()) / res.rate,
                static_cast<double>(in.samples.size()) / in.rate, 256.0 / 24000 + 1e-3);
    const auto m = etude::audio_io::read_npy(mel.string());
    ASSERT_EQ(m.shape.size(), 2u);
    EXPECT_EQ(m.shape[0], 100u);
}

TEST(CliVocode, bad_input_fails_cleanly_and_leaves_no_file) {
    const fs::path wav = tmpdir() / "bad_vocode.wav";
    const std::string model = " --model " + kNeural + "hifigan_v1.lef";
    expect_clean_error(
        run_etude("vocode" + model + " --mel " + kNeural + "vocos_mel.npy -o " + wav.string()),
        "100 mel bands");
    expect_clean_error(run_etude("vocode" + model + " --mel " + tmpdir().string() +
                                 "/none.npy -o " + wav.string()),
                       "none.npy");
    // A .npy of the wrong shape and one with a NaN.
    const fs::path flat = tmpdir() / "flat.npy", nan = tmpdir() / "nan.npy";
    std::vector<float> v(80 * 4, -5.0f);
    etude::audio_io::write_npy(flat.string(), {v.size()}, v);
    expect_clean_error(
        run_etude("vocode" + model + " --mel " + flat.string() + " -o " + wav.string()),
        "not a mel spectrogram");
    // (frames, n_mels): the error says the array looks transposed.
    const fs::path transposed = tmpdir() / "transposed.npy";
    etude::audio_io::write_npy(transposed.string(), {4, 80}, v);
    expect_clean_error(
        run_etude("vocode" + model + " --mel " + transposed.string() + " -o " + wav.string()),
        "looks transposed");
    v[7] = NAN;
    etude::audio_io::write_npy(nan.string(), {80, 4}, v);
    expect_clean_error(
        run_etude("vocode" + model + " --mel " + nan.string() + " -o " + wav.string()),
        "not finite");
    expect_clean_error(run_etude("vocode --model " + kNeural + "vocos_mel.npy --mel " + kNeural +
                                 "vocos_mel.npy -o " + wav.string()),
                       "vocos_mel.npy");
    expect_clean_error(run_etude("vocode" + model + " --mel " + kNeural +
                                 "hifigan_v1_mel.npy -o /nonexistent-dir/x.wav"),
                       "/nonexistent-dir/x.wav");
    EXPECT_TRUE(no_files_like(wav));
    EXPECT_EQ(run_etude("vocode" + model + " -o " + wav.string()).status, 2);  // no --mel
    EXPECT_EQ(run_etude("vocode" + model + " --mel x.npy -o y.wav --backend quantum").status, 1);
}
