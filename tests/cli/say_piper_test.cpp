// `etude say` with a Piper voice: Piper's files by path, at the voice's own
// rate unless --rate says otherwise, Piper's options and --json-input; bad
// voices, speakers, scales and JSON lines get a one-line error, a non-zero
// status and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/wav_file.h"

namespace fs = std::filesystem;

namespace {

using etude::test::CliRun;
using etude::test::quote;
using etude::test::run_etude;
using etude::test::tmpdir;

const std::string kData = std::string(ETUDE_TEST_DATA) + "/piper/";
const std::string kMulti = kData + "test_medium_multi.onnx";
// Valid ids of the test voices, in Piper's ^ _ (p _)* $ layout.
const std::string kIds = "[1, 0, 20, 0, 21, 0, 22, 0, 23, 0, 2]";

using Wav = etude::test::WavFile<float>;
const auto read_wav = etude::test::read_wav<float>;

void expect_clean_error(const CliRun& r, const std::string& needle, int status = 1) {
    EXPECT_EQ(r.status, status) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace

TEST(CliSayPiper, json_input_ids_speak_at_the_voices_rate_and_a_seed_repeats_them) {
    const fs::path a = tmpdir() / "piper_a.wav", b = tmpdir() / "piper_b.wav",
                   c = tmpdir() / "piper_c.wav";
    const std::string lines = "{\"phoneme_ids\": " + kIds + "}\n\n{\"phoneme_ids\": " + kIds +
                              ", \"speaker\": \"speaker_3\"}\n";
    auto say = [&](const fs::path& out, const std::string& extra) {
        return run_etude("say --voice " + quote(kMulti) + " --json-input --float -o " +
                             out.string() + " " + extra,
                         lines);
    };
    ASSERT_EQ(say(a, "--seed 5").status, 0);
    // Two speakers are two streams; --stats counts both.
    const auto b_run = say(b, "--seed 5 --stats");
    ASSERT_EQ(b_run.status, 0) << b_run.err;
    EXPECT_NE(b_run.err.find("2 sentences spoken, 0 dropped"), std::string::npos) << b_run.err;
    ASSERT_EQ(say(c, "--seed 6 --noise-scale 0.5 --length-scale 1.2 --noise-w 0.3").status, 0);
    const Wav wa = read_wav(a), wb = read_wav(b), wc = read_wav(c);
    EXPECT_EQ(wa.rate, 22050);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "stats: %.2f s of audio",
                  static_cast<double>(wa.samples.size()) / 22050.0);
    EXPECT_NE(b_run.err.find(seconds), std::string::npos) << b_run.err;
    ASSERT_GT(wa.samples.size(), 0u);
    EXPECT_EQ(wa.samples.size() % 256, 0u);  // whole frames of both sentences
    EXPECT_EQ(wa.samples, wb.samples);
    EXPECT_NE(wa.samples, wc.samples);
}

TEST(CliSayPiper, rate_resamples_and_speaker_is_taken_by_name_or_id) {
    const fs::path out = tmpdir() / "piper_rate.wav";
    const auto r = run_etude("say --voice " + quote(kMulti) + " --json-input --speaker 2 --rate " +
                                 "48000 -o " + out.string(),
                             "{\"phoneme_ids\": " + kIds + "}\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(read_wav(out).rate, 48000);
}

TEST(CliSayPiper, bad_voices_options_and_lines_are_refused_without_output) {
    const fs::path out = tmpdir() / "piper_bad.wav";
    const std::string say = "say -o " + out.string() + " --voice ";
    const std::string ids_line = "{\"phoneme_ids\": " + kIds + "}\n";
    expect_clean_error(run_etude(say + quote(kData + "missing.onnx") + " hi"), "missing.onnx.json");
    // A graph that is no VITS network, with a good config beside it.
    const fs::path bad = tmpdir() / "not-vits";
    fs::create_directories(bad);
    fs::copy_file(kData + "not_vits.onnx", bad / "not_vits.onnx",
                  fs::copy_options::overwrite_existing);
    fs::copy_file(kData + "test_x_low.onnx.json", bad / "not_vits.onnx.json",
                  fs::copy_options::overwrite_existing);
    const auto not_vits =
        run_etude(say + quote((bad / "not_vits.onnx").string()) + " --json-input", ids_line);
    expect_clean_error(not_vits, "not_vits.onnx");
    EXPECT_EQ(not_vits.err.find(".onnx.json"), std::string::npos) << not_vits.err;
    expect_clean_error(run_etude(say + quote(kMulti) + " --json-input --speaker nobody", ids_line),
                       "nobody");
    expect_clean_error(run_etude(say + quote(kMulti) + " --json-input",
                                 ids_line + "{\"phoneme_ids\": [1, 0, 70000, 0, 2]}\n"),
                       "70000");
    expect_clean_error(
        run_etude(say + quote(kMulti) + " --json-input", ids_line + "{\"text\": 3\n"), "stdin:2");
    expect_clean_error(run_etude(say + quote(kMulti) + " --json-input --noise-scale -1", ids_line),
                       "noise_scale");
    // The network refuses a sentence whose durations pass the frame limit:
    // the reason, not "nothing to pronounce".
    const auto too_long =
        run_etude(say + quote(kMulti) + " --json-input --length-scale 100000", ids_line);
    expect_clean_error(too_long, "durations add up to");
    EXPECT_EQ(too_long.err.find("could pronounce"), std::string::npos) << too_long.err;
    expect_clean_error(run_etude(say + "no-such-voice-here hi"), "no-such-voice-here");
    // Piper's options belong to Piper voices; --json-input too.
    expect_clean_error(run_etude(say + "slt --speaker 1 hi"), "--speaker", 2);
    expect_clean_error(run_etude(say + "slt --json-input", ids_line), "--json-input", 2);
    EXPECT_FALSE(fs::exists(out));
}

// Without espeak-ng's data (a machine with the library but not its data,
// as the GPU pack's machine is): phoneme ids still speak, and text is
// refused with an error that says where to look. (That espeak-ng's own
// complaint comes once per process: python/tests/test_bad_input.py, whose
// process opens the voice twice.)
TEST(CliSayPiper, without_espeak_data_ids_speak_and_text_names_espeak_data_path) {
    const fs::path empty = tmpdir() / "no-espeak-data";
    fs::create_directories(empty);
    const std::string env = "ESPEAK_DATA_PATH=" + quote(empty.string());
    const std::string lines = "{\"phoneme_ids\": " + kIds + "}\n{\"phoneme_ids\": " + kIds +
                              ", \"speaker\": \"speaker_3\"}\n";
    const CliRun ids = run_etude("say --voice " + quote(kMulti) + " --json-input -o " +
                                     (tmpdir() / "no_espeak.wav").string(),
                                 lines, env);
    EXPECT_EQ(ids.status, 0) << ids.err;
    const CliRun text = run_etude(
        "say --voice " + quote(kMulti) + " Hello. -o " + (tmpdir() / "no_espeak_text.wav").string(),
        "", env);
    EXPECT_EQ(text.status, 1) << text.err;
    EXPECT_NE(text.err.find("etude say: espeak-ng could not start"), std::string::npos) << text.err;
    EXPECT_NE(text.err.find("ESPEAK_DATA_PATH"), std::string::npos) << text.err;
}

// --precision is the arithmetic of a GPU's matrix products: TF32 exists on
// CUDA only, so on the CPU it must leave the audio exactly as FP32 makes it
// (a CPU that took it would differ in the last bits at least), and a mode
// that does not exist is a usage error naming the choices, with no output.
TEST(CliSayPiper, precision_tf32_leaves_the_cpus_audio_as_it_is_and_others_are_refused) {
    const fs::path fp32 = tmpdir() / "piper_fp32.wav", tf32 = tmpdir() / "piper_tf32.wav",
                   bad = tmpdir() / "piper_fp16.wav";
    const std::string line = "{\"phoneme_ids\": " + kIds + "}\n";
    auto say = [&](const fs::path& out, const std::string& precision) {
        return run_etude("say --voice " + quote(kMulti) + " --json-input --float --seed 3 " +
                             "--backend cpu --precision " + precision + " -o " + out.string(),
                         line);
    };
    ASSERT_EQ(say(fp32, "fp32").status, 0);
    const auto r = say(tf32, "tf32");
    ASSERT_EQ(r.status, 0) << r.err;
    const Wav a = read_wav(fp32), b = read_wav(tf32);
    ASSERT_GT(a.samples.size(), 0u);
    EXPECT_EQ(a.samples, b.samples);
    expect_clean_error(say(bad, "fp16"),
                       "--precision: unknown precision 'fp16' (choose fp32 or tf32)", 2);
    EXPECT_FALSE(fs::exists(bad));
}

// A command line written for piper-tts runs: its spellings of the options
// (-m, -s, -f, --output-raw, the underscored names, --data-dir) give what
// ours give, and -f - (Piper's WAV on standard output) is refused, not
// written to a file named "-".
TEST(CliSayPiper, piper_tts_spellings_of_the_options_give_the_same_audio) {
    const fs::path ours = tmpdir() / "piper_ours.wav", theirs = tmpdir() / "piper_theirs.wav";
    const std::string line = "{\"phoneme_ids\": " + kIds + "}\n";
    ASSERT_EQ(run_etude("say --voice " + quote(kMulti) +
                            " --speaker 3 --length-scale 1.2 --noise-w 0.3 --sentence-silence 0.2"
                            " --json-input -o " +
                            ours.string(),
                        line)
                  .status,
              0);
    const CliRun r = run_etude("say --data-dir " + quote(kData) +
                                   " -m test_medium_multi -s 3 --length_scale=1.2 --noise_w 0.3"
                                   " --sentence_silence 0.2 --json-input -f " +
                                   theirs.string(),
                               line);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(etude::test::slurp(ours), etude::test::slurp(theirs));
    const CliRun raw = run_etude("say -m " + quote(kMulti) + " --json-input --output_raw", line);
    ASSERT_EQ(raw.status, 0) << raw.err;
    EXPECT_FALSE(raw.out.empty());
    const CliRun dash = run_etude("say -m " + quote(kMulti) + " --json-input -f -", line);
    EXPECT_EQ(dash.status, 2) << dash.err;
    EXPECT_NE(dash.err.find("--raw"), std::string::npos) << dash.err;
    EXPECT_FALSE(fs::exists("-"));
}
