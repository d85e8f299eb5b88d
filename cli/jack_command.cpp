// etude jack: a JACK client that speaks lines from standard input.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <string>
#include <utility>

#include "audio-io/jack_output.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/voice_options.h"
#include "engine/engine.h"

namespace etude::cli {
namespace {

std::atomic<int> g_signal{0};
extern "C" void on_jack_signal(int sig) {
    g_signal.store(sig);
}

struct Line {
    std::string text;
    std::size_t sentences;
};

void print_stats(const audio_io::JackOutput& jack, const engine::StreamStats& s) {
    const auto& d = jack.callback_durations();
    std::fprintf(
        stderr,
        "etude jack: stats: rate %u Hz, period %u frames, latency %.1f ms (%u frames "
        "reported)\n"
        "  blocks %llu (primary %llu, fallback %llu, ahead %llu), fallbacks %llu, "
        "late %llu, reduced tier %llu\n"
        "  underruns %llu (%llu samples), xruns %llu, callbacks %llu, callback "
        "p50 %.1f us p99 %.1f us max %.1f us\n"
        "  sentences %llu spoken, %llu dropped, first audio %.1f ms, realtime workers %s\n",
        jack.sample_rate(), jack.buffer_size(), s.latency_ms, jack.reported_latency_frames(),
        (unsigned long long)s.blocks, (unsigned long long)s.blocks_primary,
        (unsigned long long)s.blocks_fallback, (unsigned long long)s.blocks_ahead,
        (unsigned long long)s.fallbacks, (unsigned long long)s.late_blocks,
        (unsigned long long)s.reduced_tier_blocks, (unsigned long long)s.underruns,
        (unsigned long long)s.underrun_samples, (unsigned long long)jack.xruns(),
        (unsigned long long)jack.callbacks(), d.percentile_us(0.5), d.percentile_us(0.99),
        d.max_us(), (unsigned long long)s.sentences_spoken, (unsigned long long)s.sentences_dropped,
        s.first_audio_ms, s.realtime_workers ? "yes" : "no (SCHED_FIFO refused)");
    if (s.vocoder == "spectral") {
        if (!s.gpu_device.empty())
            std::fprintf(stderr,
                         "  spectral vocoder: %llu blocks on %s, %llu device failure(s)%s%s\n",
                         (unsigned long long)s.blocks_gpu, s.gpu_device.c_str(),
                         (unsigned long long)s.gpu_failures, s.gpu_disabled ? " (GPU now off)" : "",
                         s.gpu_last_error.empty() ? "" : ("; last: " + s.gpu_last_error).c_str());
        else
            std::fprintf(stderr, "  spectral vocoder on the CPU (%s)\n", s.gpu_note.c_str());
    }
    if (s.sentences_unspeakable > 0 && s.unspeakable_reason.empty())
        std::fprintf(
            stderr,
            "etude jack: %llu sentence(s) had nothing the voice could pronounce and were skipped\n",
            (unsigned long long)s.sentences_unspeakable);
    else if (s.sentences_unspeakable > 0)
        std::fprintf(stderr, "etude jack: %llu sentence(s) were refused and skipped (last: %s)\n",
                     (unsigned long long)s.sentences_unspeakable, s.unspeakable_reason.c_str());
}

audio_io::JackOptions read_jack_options(const CommandLine& args) {
    audio_io::JackOptions opts;
    opts.client_name = args.value_or("--name", "etude");
    opts.server_name = args.value_or("--server", "");
    apply_voice_options(args, opts.stream);
    apply_synthesis_options(args, opts.stream);
    // Start-up may wait for a device to build its state; speech may not.
    opts.stream.wait_for_device = true;
    if (auto trace = args.value("--trace")) engine::Stream::check_trace_path(*trace);
    return opts;
}

// The lines read from standard input and spoken on the client's stream.
// Lines pushed and not yet fully spoken are kept, so that nothing is lost
// silently: they are re-queued after a sample-rate change and counted when
// speech is stopped.
class LineSpeaker {
  public:
    explicit LineSpeaker(audio_io::JackOutput& jack) : jack_(jack) {}

    // Reads what standard input has within 20 ms and speaks its whole lines;
    // at its end, the last unfinished line. Returns false once input ended.
    bool read_input() {
        if (eof_) return false;
        pollfd pfd{STDIN_FILENO, POLLIN, 0};
        if (::poll(&pfd, 1, 20) <= 0) return true;
        char chunk[65536];
        const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
        if (n <= 0) {
            eof_ = true;
            if (!buffer_.empty()) handle_line(std::exchange(buffer_, {}));
            return false;
        }
        buffer_.append(chunk, static_cast<std::size_t>(n));
        std::size_t nl;
        while ((nl = buffer_.find('\n')) != std::string::npos) {
            handle_line(buffer_.substr(0, nl));
            buffer_.erase(0, nl + 1);
        }
        return true;
    }

    // Forgets the lines whose sentences have all been spoken or dropped.
    void settle() {
        const auto st = jack_.stream().stats();
        const std::uint64_t settled = st.sentences_spoken + st.sentences_dropped;
        while (!pending_.empty() && settled >= consumed_ + pending_.front().sentences) {
            consumed_ += pending_.front().sentences;
            pending_.pop_front();
        }
    }

    // The server's rate changed: start again at the new rate with what was
    // not yet spoken.
    void requeue_at_new_rate() {
        settle();
        std::fprintf(stderr, "etude jack: JACK sample rate is now %u Hz; re-queueing %zu line(s)\n",
                     jack_.sample_rate(), pending_.size());
        jack_.stream().cancel();
        jack_.recreate_stream();
        std::deque<Line> again;
        again.swap(pending_);
        consumed_ = 0;  // a new stream counts from zero
        for (auto& l : again) handle_line(l.text);
    }

    // Stopped by a signal: says what is dropped and stops speech at once.
    void stop(int signal) {
        settle();
        const auto st = jack_.stream().stats();
        const std::uint64_t unspoken =
            st.sentences_queued - st.sentences_spoken - st.sentences_dropped;
        std::fprintf(
            stderr,
            "etude jack: stopped by signal %d; dropping %llu queued sentence(s) in %zu line(s)\n",
            signal, (unsigned long long)unspoken, pending_.size());
        jack_.stream().cancel();
    }

    std::size_t pending_lines() const { return pending_.size(); }

  private:
    void handle_line(std::string line) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line == "/stop") {
            jack_.stream().cancel();
            pending_.clear();
            // Every sentence queued so far will settle as dropped or spoken.
            consumed_ = jack_.stream().stats().sentences_queued;
            return;
        }
        if (line.rfind("/voice", 0) == 0) {
            const std::string name = line.size() > 7 ? line.substr(7) : "";
            try {
                jack_.stream().set_voice(name);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "etude jack: %s; keeping the current voice\n", e.what());
            }
            return;
        }
        try {
            // Each line is a whole utterance: its last sentence is not held
            // for the next line.
            std::size_t n = jack_.stream().push_text(line);
            n += jack_.stream().end_input();
            if (n > 0) pending_.push_back({line, n});
        } catch (const std::exception& e) {
            std::fprintf(stderr, "etude jack: line not spoken: %s\n", e.what());
        }
    }

    audio_io::JackOutput& jack_;
    std::deque<Line> pending_;
    // How many of the stream's settled (spoken or dropped) sentences belong
    // to lines already removed from pending_.
    std::uint64_t consumed_ = 0;
    std::string buffer_;  // an unfinished line
    bool eof_ = false;
};

// Speaks standard input's lines until it ends and all is spoken, a signal
// or the server going away; returns the exit status.
int speak_lines(audio_io::JackOutput& jack) {
    LineSpeaker lines(jack);
    bool reading = true;
    while (!g_signal) {
        if (jack.server_gone()) {
            std::fprintf(stderr,
                         "etude jack: the JACK server shut down (%s); %zu line(s) not spoken\n",
                         jack.shutdown_reason().c_str(), lines.pending_lines());
            return 1;
        }
        if (jack.rate_changed()) lines.requeue_at_new_rate();
        if (reading) {
            reading = lines.read_input();
        } else {
            if (!jack.stream().busy()) break;
            ::usleep(20000);
        }
        lines.settle();
    }
    if (g_signal) lines.stop(g_signal.load());
    return 0;
}

int run_jack(const CommandLine& args) {
    const audio_io::JackOptions opts = read_jack_options(args);
    engine::Engine::Options engine_options{{}};
    engine_options.profile_kernels = args.value("--trace").has_value();  // the trace's kernel rows
    engine_options.device_precision = parse_precision_option(args);
    engine::Engine engine(engine_options);
    audio_io::JackOutput jack(engine, opts);
    jack.activate();
    for (const auto& port : args.values("--connect")) jack.connect(port);
    std::fprintf(stderr,
                 "etude jack: %s at %u Hz, %u-frame periods, latency %.1f ms; reading lines\n",
                 jack.port_name().c_str(), jack.sample_rate(), jack.buffer_size(),
                 jack.stream().latency_ms());

    std::signal(SIGINT, on_jack_signal);
    std::signal(SIGTERM, on_jack_signal);
    std::signal(SIGPIPE, SIG_IGN);
    const int status = speak_lines(jack);
    print_stats(jack, jack.stream().stats());
    if (auto trace = args.value("--trace")) jack.stream().write_trace(*trace);
    return status;
}

}  // namespace

int jack_command(int argc, char** argv) {
    return run_command("jack", [&] {
        CommandLine args(
            "etude jack [options]",
            "A JACK client with one mono output port, 'out'. It reads lines of text from\n"
            "standard input and speaks them in order as they arrive. Special lines:\n"
            "  /stop          stop speaking now (short fade) and drop the queued lines\n"
            "  /voice NAME    speak the following lines with voice NAME (slt, rms, awb)\n"
            "At the end of input it finishes speaking, prints its statistics and exits;\n"
            "SIGINT or SIGTERM stops at once (statistics still printed, dropped lines named).");
        args.option("--name", "NAME", "JACK client name (default: etude)")
            .option("--server", "NAME",
                    "JACK server name (default: $JACK_DEFAULT_SERVER or 'default')")
            .option("--connect", "PORT",
                    "connect 'out' to PORT; 'system' means the physical playback ports; "
                    "repeatable (default: connect nothing)")
            .option("--latency-ms", "MS",
                    "the fixed latency budget the engine adds, 5-10000 (default: 100); raised to "
                    "twice the JACK period if that is larger")
            .option("--trace", "FILE",
                    "write the scheduler's per-block trace (Chrome JSON, opens in Perfetto)")
            .option("--vocoder", "NAME",
                    "mlsa (default: exact, CPU) or spectral (frame-parallel, GPU-capable)")
            .option("--backend", "NAME",
                    "for --vocoder spectral and Piper voices: auto (default: a GPU if there is "
                    "one), cpu, cuda, vulkan, opencl")
            .option("--gpu-device", "N",
                    "index of the device within that backend (default: the best; see 'etude "
                    "devices')")
            .option("--precision", "MODE", kPrecisionOptionHelp);
        declare_voice_options(args, std::string("initial voice: ") + kVoiceOptionHelp +
                                        " (a Piper voice speaks every line; /voice then keeps it)");
        args.footer(
            "The server's sample rate is used (speech is resampled to it). No server is\n"
            "started: run jackd yourself (e.g. 'jackd -d dummy -r 48000 -p 128' headless).\n"
            "exit status: 0 all input spoken, 1 runtime error or server gone, 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        return run_jack(args);
    });
}

}  // namespace etude::cli
