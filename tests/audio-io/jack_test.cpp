// etude jack and etude say --play (PortAudio's JACK host API) against a real
// jackd with the dummy driver: live audio equals the offline render, with no
// underruns and no xrun blamed on us, while both cores are loaded.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <thread>

#include "engine/piper/espeak_session.h"
#include "support/emulation.h"
#include "support/jack_harness.h"
#include "support/wav_file.h"

using namespace etude::test;

namespace {

const std::vector<std::string> kLines = {
    "Good evening, and welcome to the live speech test.",
    "Every block must arrive before the audio callback needs it.",
    "If one is late, another processor covers it."};

std::string joined() {
    std::string t;
    for (const auto& l : kLines) t += (t.empty() ? "" : " ") + l;
    return t;
}

std::string write_input(const std::string& name, const std::string& text) {
    const std::string path = std::string(ETUDE_TEST_TMP) + "/" + name;
    std::ofstream(path) << text;
    return path;
}

// The offline render by `etude say` (float WAV), with any extra options.
std::vector<float> offline_render(int rate, const std::string& text,
                                  const std::string& options = "") {
    const std::string wav =
        std::string(ETUDE_TEST_TMP) + "/offline-" + std::to_string(rate) + ".wav";
    const std::string in = write_input("offline.txt", text);
    const auto r =
        run_etude("say --float --rate " + std::to_string(rate) + " " + options + " -o " + wav, in);
    EXPECT_EQ(r.status, 0) << r.err;
    return read_wav<float>(wav).samples;
}

std::size_t first_nonzero(const std::vector<float>& x) {
    std::size_t i = 0;
    while (i < x.size() && x[i] == 0.0f) ++i;
    return i;
}

// The captured stream contains the offline render exactly, once, after silence.
void expect_contains_render(const std::vector<float>& captured, const std::vector<float>& offline) {
    ASSERT_FALSE(offline.empty());
    const std::size_t a = first_nonzero(captured), b = first_nonzero(offline);
    ASSERT_LT(a, captured.size()) << "nothing was captured";
    ASSERT_GE(a, b);
    const std::size_t start = a - b;
    ASSERT_GE(captured.size(), start + offline.size()) << "capture ended early";
    std::size_t mismatches = 0, first_bad = 0;
    for (std::size_t i = 0; i < offline.size(); ++i)
        if (captured[start + i] != offline[i] && mismatches++ == 0) first_bad = i;
    EXPECT_EQ(mismatches, 0u) << "first mismatch at offline sample " << first_bad << " of "
                              << offline.size();
    for (std::size_t i = start + offline.size(); i < captured.size(); ++i)
        ASSERT_EQ(captured[i], 0.0f) << "audio after the end of the render at " << i;
}

// As expect_contains_render, but allowing for cycles jackd skipped: at up to
// `xruns` places whole periods were lost (the render goes on later, shifted
// back) or repeated or inserted (shifted on), and the render goes on
// exactly (or within `tolerance`) from there.
void expect_render_but_for_skipped_cycles(const std::vector<float>& captured,
                                          const std::vector<float>& offline, long period, int xruns,
                                          float tolerance = 0.0f) {
    ASSERT_FALSE(offline.empty());
    const std::size_t a = first_nonzero(captured), b = first_nonzero(offline);
    ASSERT_LT(a, captured.size()) << "nothing was captured";
    ASSERT_GE(a, b);
    const auto n = static_cast<long>(offline.size()), m = static_cast<long>(captured.size());
    // Samples from offline index j on that equal the capture shifted by s.
    const auto matching = [&](long j, long s) {
        long k = j;
        while (k < n && k + s >= 0 && k + s < m &&
               std::abs(captured[static_cast<std::size_t>(k + s)] -
                        offline[static_cast<std::size_t>(k)]) <= tolerance)
            ++k;
        return k - j;
    };
    long shift = static_cast<long>(a - b), i = 0;
    for (int jumps = 0;; ++jumps) {
        i += matching(i, shift);
        if (i >= n) break;
        ASSERT_LT(jumps, xruns) << "offline sample " << i << " of " << n << " differs, after "
                                << jumps << " skipped cycle(s)";
        // The render resumes within a few periods of the first difference,
        // shifted by whole periods.
        long best = 0, best_shift = shift, best_from = i;
        for (long p = -xruns; p <= xruns; ++p)
            for (long r = i; p != 0 && r < std::min(n, i + (std::abs(p) + 1) * period); ++r) {
                const long len = matching(r, shift + p * period);
                if (len > best) best = len, best_shift = shift + p * period, best_from = r;
            }
        ASSERT_GE(best, std::min(period, n - best_from))
            << "offline sample " << i << " differs and no shift by whole periods explains it";
        std::printf(
            "[capture] shifted by %ld samples from offline sample %ld (%ld "
            "samples lost)\n",
            best_shift - shift, best_from, best_from - i);
        shift = best_shift;
        i = best_from;
    }
    for (long k = n + shift; k < m; ++k)
        ASSERT_EQ(captured[static_cast<std::size_t>(k)], 0.0f) << "audio after the render at " << k;
}

// What a live run left: etude's exit and output, and the xruns jackd
// logged while it ran (all of them, and those while the named client's
// callback was running).
struct LiveRun {
    ProgramRun run;
    int xruns = 0;
    RunningXruns running;  // those naming our client as running, ours and the machine's
};

// `etude jack` speaking the lines of `in` into the capture client; with
// `loaded`, both cores are kept busy at normal priority for the whole run.
LiveRun jack_client_run(JackServer& server, const std::string& name, const std::string& in,
                        const std::string& options, bool loaded) {
    LiveRun r;
    std::optional<CpuLoad> load;
    if (loaded) load.emplace(2);
    r.run = run_etude(
        "jack --server " + server.name() + " --name " + name + " --connect capture:in " + options,
        in);
    r.xruns = server.xruns();
    r.running = server.running_xruns(name);
    std::printf("[jack %s] %s", name.c_str(), r.run.err.c_str());
    std::printf(
        "[jack %s] jackd logged %d xrun(s) in total, %d naming it, %d while its callback ran "
        "(and %d more in a cycle that stalled jackd's own thread, %d while the machine held a "
        "CPU: the machine's); %s\n",
        name.c_str(), r.xruns, server.xruns_blaming(name), r.running.ours, r.running.stalled,
        r.running.held, server.stall_report().c_str());
    return r;
}

// `etude say --play` through PortAudio's JACK host API, its output port
// connected to the capture client as soon as it appears.
LiveRun portaudio_run(JackServer& server, CaptureClient& capture, const std::string& in,
                      const std::string& options, bool loaded) {
    std::thread connector(
        [&] { capture.connect_when_present("PortAudio:out_0", std::chrono::seconds(20)); });
    LiveRun r;
    {
        std::optional<CpuLoad> load;
        if (loaded) load.emplace(2);
        r.run = run_etude("say --play --host-api JACK --rate 48000 --stats " + options, in,
                          "JACK_DEFAULT_SERVER=" + server.name());
    }
    connector.join();
    r.xruns = server.xruns();
    r.running = server.running_xruns("PortAudio");
    std::printf("[portaudio] %s", r.run.err.c_str());
    std::printf(
        "[portaudio] jackd: %d xrun(s), %d while PortAudio's callback ran (and %d more in a "
        "cycle that stalled jackd's own thread, %d while the machine held a CPU: the "
        "machine's); %s\n",
        r.xruns, r.running.ours, r.running.stalled, r.running.held, server.stall_report().c_str());
    return r;
}

// The checks every live test makes: etude exited 0 with no underrun, no
// xrun came while our callback ran, and the capture equals the offline
// render sample for sample. An xrun that is not ours ("triggered": a client
// not yet scheduled, the VM's jitter, which hits the trivial capture client
// alike; or "running" while the machine held a CPU, jack_harness.h) is
// reported, not counted; a cycle jackd skips shifts what the
// capture records by whole periods (seen in a loaded round: 7 xruns, none
// while our callback ran, no underrun, the capture shifted from offline
// sample 91,776 on), so with xruns logged the render must still be there
// exactly, but for whole periods lost or repeated at no more places than
// there were xruns.
void expect_live_equals_offline(const LiveRun& r, const CaptureClient& capture,
                                const std::vector<float>& offline, JackServer& server,
                                long period) {
    ASSERT_EQ(r.run.status, 0) << r.run.err;
    EXPECT_EQ(stat_value(r.run.err, "underruns"), 0);
    EXPECT_EQ(r.running.ours, 0) << server.log();
    if (r.xruns == 0) {
        expect_contains_render(capture.recorded(), offline);
    } else {
        expect_render_but_for_skipped_cycles(capture.recorded(), offline, period, r.xruns);
    }
}

std::string lines_input(const std::string& name) {
    std::string input;
    for (const auto& l : kLines) input += l + "\n";
    return write_input(name, input);
}

}  // namespace

// The attribution, on jackd logs as they came: the CI run at 1656dd0
// (256 frames at 48 kHz, 5,333 us) whose driver's own cycle stalled 4 ms
// with our callback in it, and the troubleshooting guide's run (16 frames,
// 333 us) where the driver was 18 us late and our client still running:
// that one is ours.
TEST(JackXrunAttribution, a_client_running_in_a_cycle_that_stalled_jackd_itself_is_not_blamed) {
    const std::string stalled_ci =
        "JackTimedDriver::Process XRun = 4050 usec\n"
        "JackEngine::XRun: client = capture was not finished, state = Triggered\n"
        "JackEngine::XRun: client = etude-piper was not finished, state = Running\n"
        "JackAudioDriver::ProcessGraphAsyncMaster: Process error\n"
        "JackTimedDriver::Process XRun = 22 usec\n";
    auto r = running_xruns_in(unstamped(stalled_ci), "etude-piper", 1e6 * 256 / 48000);
    EXPECT_EQ(r.ours, 0);
    EXPECT_EQ(r.stalled, 1);
    const std::string guide =
        "JackTimedDriver::Process XRun = 18 usec\n"
        "JackEngine::XRun: client = etude was not finished, state = Running\n"
        "JackAudioDriver::ProcessGraphAsyncMaster: Process error\n"
        "JackEngine::XRun: client = etude was not finished, state = Running\n"
        "JackAudioDriver::ProcessGraphAsyncMaster: Process error\n";
    r = running_xruns_in(unstamped(guide), "etude", 1e6 * 16 / 48000);
    EXPECT_EQ(r.ours, 2);
    EXPECT_EQ(r.stalled, 0);
    // The stall ends with its cycle's list: a later cycle is judged alone.
    r = running_xruns_in(unstamped(stalled_ci + guide), "etude", 1e6 * 256 / 48000);
    EXPECT_EQ(r.ours, 2);
}

// The CI run at 5151fcb (256 frames, 5,333 us): jackd's driver logged no
// stall of its own, PortAudio's client was still running in the second
// xrun. Stamped as the reader would have (at 1 s and 1.02 s), it is the
// machine's when the stall probe saw a CPU held a quarter period or more
// within the two periods before the line, and ours otherwise: a stall too
// short, too early, or after the line excuses nothing.
TEST(JackXrunAttribution, a_client_running_while_the_probe_saw_a_cpu_held_is_not_blamed) {
    const double period_us = 1e6 * 256 / 48000;
    auto log = unstamped(
        "JackEngine::XRun: client = capture was not finished, state = Triggered\n"
        "JackEngine::XRun: client = PortAudio was not finished, state = Triggered\n"
        "JackAudioDriver::ProcessGraphAsyncMaster: Process error\n"
        "JackEngine::XRun: client = capture was not finished, state = Triggered\n"
        "JackEngine::XRun: client = PortAudio was not finished, state = Running\n"
        "JackAudioDriver::ProcessGraphAsyncMaster: Process error\n");
    const std::int64_t ms = 1'000'000, line = 1020 * ms;
    for (std::size_t i = 0; i < log.size(); ++i) log[i].ns = i < 3 ? 1000 * ms : line;
    const auto judged = [&](std::int64_t from, std::int64_t to) {
        return running_xruns_in(log, "PortAudio", period_us, {MachineStall{1, from, to}});
    };
    EXPECT_EQ(running_xruns_in(log, "PortAudio", period_us).ours, 1);
    // 3 ms held, ending 4 ms before the line (inside 2 periods, 10.7 ms).
    auto r = judged(line - 7 * ms, line - 4 * ms);
    EXPECT_EQ(r.ours, 0);
    EXPECT_EQ(r.held, 1);
    // A stall still going on when the line was read.
    EXPECT_EQ(judged(line - 3 * ms, line + 2 * ms).held, 1);
    // A quarter period is 1,333 us: 1.2 ms excuses nothing.
    EXPECT_EQ(judged(line - 3 * ms, line - 3 * ms + 1200'000).ours, 1);
    // Ended 12 ms before the line, or began after it.
    EXPECT_EQ(judged(line - 20 * ms, line - 12 * ms).ours, 1);
    EXPECT_EQ(judged(line + 1 * ms, line + 5 * ms).ours, 1);
    // Triggered lines are never ours, stall or not.
    EXPECT_EQ(running_xruns_in(log, "capture", period_us).ours, 0);
}

TEST(JackClient, speaks_lines_live_equal_to_the_offline_render_under_cpu_load) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    JackServer server(48000, 128, "live");
    ASSERT_TRUE(server.ready()) << "jackd did not start:\n" << server.log();
    CaptureClient capture(server.name(), 40.0);
    ASSERT_TRUE(capture.ok());
    const auto offline = offline_render(48000, joined());
    const auto r = jack_client_run(server, "etude-live", lines_input("lines.txt"), "", true);
    EXPECT_NE(r.run.err.find("sentences 3 spoken, 0 dropped"), std::string::npos) << r.run.err;
    expect_live_equals_offline(r, capture, offline, server, 128);
}

// A Piper voice (the small test voice, reduced channels) through etude jack
// and through PortAudio's JACK host API: live equals `etude say` of the same
// text and seed, with no underrun, while both cores are loaded.
TEST(JackClient, a_piper_voice_speaks_live_equal_to_its_offline_render) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng: Piper voices take no text";
    // --backend cpu: the same tier live and offline wherever a GPU exists.
    const std::string voice = "--voice " + std::string(ETUDE_TEST_DATA) +
                              "/piper/test_medium.onnx --seed 3 --backend cpu";
    JackServer server(48000, 256, "piper");
    ASSERT_TRUE(server.ready()) << server.log();
    CaptureClient capture(server.name(), 40.0);
    ASSERT_TRUE(capture.ok());
    // Two of the lines (the Piper voice on the CPU is the slowest here; a
    // third line added 5 s and no other case): the live client still goes
    // from one line to the next.
    const auto offline = offline_render(48000, kLines[0] + " " + kLines[1], voice);
    const auto r = jack_client_run(
        server, "etude-piper", write_input("piper-lines.txt", kLines[0] + "\n" + kLines[1] + "\n"),
        voice, true);
    EXPECT_NE(r.run.err.find("sentences 2 spoken, 0 dropped"), std::string::npos) << r.run.err;
    expect_live_equals_offline(r, capture, offline, server, 256);
}

TEST(JackClient, a_piper_voice_plays_through_portaudio_equal_to_its_offline_render) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    if (!etude::piper::EspeakSession::available())
        GTEST_SKIP() << "built without espeak-ng: Piper voices take no text";
    const std::string voice = "--voice " + std::string(ETUDE_TEST_DATA) +
                              "/piper/test_medium.onnx --seed 4 --backend cpu";
    JackServer server(48000, 256, "papiper");
    ASSERT_TRUE(server.ready()) << server.log();
    CaptureClient capture(server.name(), 30.0);
    ASSERT_TRUE(capture.ok());
    const auto offline = offline_render(48000, kLines[1], voice);
    const auto r =
        portaudio_run(server, capture, write_input("pa-piper.txt", kLines[1]), voice, true);
    expect_live_equals_offline(r, capture, offline, server, 256);
}

TEST(JackClient, portaudio_jack_host_api_plays_the_same_audio) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    JackServer server(48000, 256, "pa");
    ASSERT_TRUE(server.ready()) << server.log();
    CaptureClient capture(server.name(), 30.0);
    ASSERT_TRUE(capture.ok());
    const auto offline = offline_render(48000, kLines[0]);
    // Unloaded: the plain path (the Piper case above runs it loaded).
    const auto r = portaudio_run(server, capture, write_input("pa.txt", kLines[0]), "", false);
    expect_live_equals_offline(r, capture, offline, server, 256);
}

TEST(JackClient, tiny_and_huge_periods_still_speak_correctly) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    for (int period : {16, 4096}) {
        JackServer server(48000, period, std::string("p").append(std::to_string(period)));
        ASSERT_TRUE(server.ready()) << server.log();
        CaptureClient capture(server.name(), 30.0);
        const auto offline = offline_render(48000, kLines[1]);
        const std::string in = write_input("period.txt", kLines[1] + "\n");
        const auto run = run_etude("jack --server " + server.name() + " --connect capture:in", in);
        std::printf("[jack -p %d] %s", period, run.err.c_str());
        ASSERT_EQ(run.status, 0) << run.err;
        EXPECT_EQ(stat_value(run.err, "underruns"), 0) << period;
        if (period == 4096) {  // the latency grows to cover two periods
            EXPECT_NE(run.err.find("latency 170.7 ms"), std::string::npos) << run.err;
        }
        // At 4096 frames (85 ms) no xrun may be ours. At 16 frames (333 us) a
        // VM preempting the process thread mid-callback is blamed on whoever
        // was running, so there it is reported, beside the trivial client.
        if (period == 4096) {
            EXPECT_EQ(server.xruns_while_running("etude"), 0) << server.log();
        }
        std::printf(
            "[jack -p %d] jackd: %d xrun(s), %d naming etude (%d while its callback ran), "
            "%d naming the trivial capture client\n",
            period, server.xruns(), server.xruns_blaming("etude"),
            server.xruns_while_running("etude"), server.xruns_blaming("capture"));
        // At 16-frame periods this VM's scheduling jitter makes the dummy
        // driver xrun even with trivial clients, and a skipped cycle drops
        // samples between clients; compare exactly only when none happened.
        // A 4096-frame pull takes 85 ms out of the ring at once, so right
        // after one the next block's deadline is short; on a loaded machine
        // the scheduler may then make a block at the reduced tier rather
        // than risk an underrun (seen: 1 of 364 blocks in one of 5 rounds
        // with both cores busy). That block, and the filter state it hands
        // on, differ from the offline render by design; the stream reports
        // it, and the exact comparison needs none.
        const long long reduced = stat_value(run.err, "reduced tier");
        ASSERT_GE(reduced, 0) << "no 'reduced tier' count in the statistics: " << run.err;
        if (server.xruns() == 0 && reduced == 0) {
            expect_contains_render(capture.recorded(), offline);
        } else if (server.xruns() == 0) {
            std::printf("[jack -p %d] %lld reduced-tier block(s): exact comparison skipped\n",
                        period, reduced);
            EXPECT_GE(capture.recorded().size(), offline.size());
        } else {
            std::printf("[jack -p %d] %d xrun(s) not caused by etude: exact comparison skipped\n",
                        period, server.xruns());
            EXPECT_GT(capture.recorded().size(), offline.size());
        }
    }
}

TEST(JackClient, missing_server_and_missing_port_give_clear_errors) {
    if (const char* emulator = etude::test::emulator())
        GTEST_SKIP() << "under emulation (" << emulator << ") the etude program this test "
                     << "starts is a foreign binary (no binfmt); the native suite runs it";
    const std::string in = write_input("none.txt", "hello\n");
    auto r = run_etude("jack --server no-such-server-xyz", in);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("no JACK server is running named 'no-such-server-xyz'"), std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

    JackServer server(48000, 256, "port");
    ASSERT_TRUE(server.ready());
    r = run_etude("jack --server " + server.name() + " --connect nowhere:port", in);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("cannot connect to 'nowhere:port': no such JACK port"), std::string::npos)
        << r.err;
}

TEST(JackClient, server_going_away_is_reported_not_a_hang) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    JackServer server(48000, 256, "gone", /*reused_name=*/true);  // see JackServer
    ASSERT_TRUE(server.ready());
    // A long text kept open on stdin (a fifo would also do): the client is
    // mid-speech when the server dies.
    std::string text;
    for (int i = 0; i < 20; ++i)
        text += "This sentence is one of many, spoken while the server stops.\n";
    const std::string in = write_input("gone.txt", text);
    std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        server.stop();
    });
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_etude("jack --server " + server.name(), in, "", 30);
    killer.join();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("the JACK server shut down"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("line(s) not spoken"), std::string::npos) << r.err;
    EXPECT_LT(secs, 10.0);
}

TEST(JackClient, a_flood_of_lines_is_queued_and_what_is_dropped_is_said) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    JackServer server(48000, 256, "flood");
    ASSERT_TRUE(server.ready());
    std::string text;
    for (int i = 0; i < 300; ++i)
        text += "Line number " + std::to_string(i) + " arrives faster than speech.\n";
    text += std::string(100000, 'a') + " very long line.\n";  // one 100 kB line
    const std::string fifo = std::string(ETUDE_TEST_TMP) + "/flood.txt";
    std::ofstream(fifo) << text;
    // Stop it after 2 s with SIGTERM: it must say what it did not speak.
    const std::string err = std::string(ETUDE_TEST_TMP) + "/flood.err";
    const std::string cmd = "timeout --preserve-status -s TERM 2 " + std::string(ETUDE_CLI_PATH) +
                            " jack --server " + server.name() + " < " + fifo + " 2> " + err;
    const int rc = std::system(cmd.c_str());
    const std::string out = slurp(err);
    EXPECT_EQ(WEXITSTATUS(rc), 0) << out;  // a signal is an orderly stop
    EXPECT_NE(out.find("stopped by signal 15; dropping"), std::string::npos) << out;
    const auto p = out.find("dropping ");
    ASSERT_NE(p, std::string::npos);
    EXPECT_GT(std::atol(out.c_str() + p + 9), 250) << out;
    EXPECT_NE(out.find("underruns 0"), std::string::npos) << out;
}

// GPU faults during a live JACK stream: the CPU remakes the affected blocks in
// time. GPU and CPU compute the spectral vocoder in float on different paths,
// so live audio equals the CPU's offline render within 1e-4 (not bit for bit).
// A cycle in which jackd finds a client unfinished leaves the capture short
// of that period whoever was late, so the live-equals-offline comparison only
// holds for runs without xruns. At 128-frame periods this VM's dummy driver
// logged bursts of them (12, once 182 in ten seconds, mostly the trivial
// capture client not even scheduled) in some full test runs, so this test,
// which is about the GPU tier failing rather than tight periods, runs at
// 1024 frames (tiny periods have their own test). With xruns logged the
// capture must hold the render within 1e-4 but for whole periods skipped
// at no more places than there were xruns, as in the other live tests;
// underruns, fallbacks and xruns of ours are checked on every fault.
TEST(JackClient, gpu_failures_out_of_memory_and_lateness_cause_no_underrun) {
    ETUDE_SKIP_WHEN_EMULATED("a live JACK client runs against jackd's clock");
    JackServer server(48000, 1024, "gpufault");
    ASSERT_TRUE(server.ready()) << server.log();
    // Two lines (about 6 s, played in real time once per fault; a third
    // added 3 s a fault and nothing else): each fault, after 600 of the
    // device's operations, still lands mid-speech (the stats lines say
    // where: a fallback among 674 blocks).
    std::string text, lines;
    for (const auto& l : {kLines[0], kLines[1]}) {
        text += (text.empty() ? "" : " ") + l;
        lines += l + "\n";
    }
    const auto offline = offline_render(48000, text, "--vocoder spectral --backend cpu");
    const std::string in = write_input("gpufault.txt", lines);
    for (const char* fault : {"kernel:2:0:600", "oom:2:0:600", "late:2:250:600"}) {
        const int xruns_before = server.xruns();
        const int ours_before = server.xruns_while_running("etude-gpu");
        CaptureClient capture(server.name(), 40.0);
        ASSERT_TRUE(capture.ok());
        const auto run = run_etude(
            "jack --server " + server.name() +
                " --name etude-gpu --vocoder spectral --backend opencl --connect capture:in",
            in, std::string("ETUDE_FAULT=") + fault);
        std::printf("[jack gpu fault %s] %s", fault, run.err.c_str());
        if (run.err.find("no GPU processor") != std::string::npos ||
            run.err.find("no OpenCL device") != std::string::npos)
            GTEST_SKIP() << "no OpenCL device: " << run.err;
        ASSERT_EQ(run.status, 0) << run.err;
        EXPECT_EQ(stat_value(run.err, "underruns"), 0) << fault;
        EXPECT_GT(stat_value(run.err, "fallbacks"), 0) << fault << ": the fault never hit a block";
        const int xruns = server.xruns() - xruns_before;
        const int ours = server.xruns_while_running("etude-gpu") - ours_before;
        std::printf(
            "[jack gpu fault %s] jackd logged %d xrun(s), %d with our callback running; %s\n",
            fault, xruns, ours, server.stall_report().c_str());
        EXPECT_EQ(ours, 0) << fault << "\n" << server.log();
        SCOPED_TRACE(fault);
        expect_render_but_for_skipped_cycles(capture.recorded(), offline, 1024, xruns, 1e-4f);
    }
}
