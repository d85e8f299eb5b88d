// Test harness for JACK: a private jackd with the dummy driver, a capture
// client, a CPU load generator, and a way to run the etude program.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <jack/jack.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rt/monotonic_clock.h"
#include "support/stall_probe.h"

namespace etude::test {

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline void quiet_jack(const char*) {}

// A line of jackd's output and when the harness read it (CLOCK_MONOTONIC;
// jackd writes its errors unbuffered, and the reader runs at SCHED_FIFO
// where allowed, so that is within microseconds of the check that logged
// it unless the machine held the reader too).
struct StampedLine {
    std::int64_t ns = 0;
    std::string text;
};

// A log given as text (a canned one), every line stamped 0.
inline std::vector<StampedLine> unstamped(const std::string& log) {
    std::vector<StampedLine> lines;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) lines.push_back({0, line});
    return lines;
}

// The xruns a jackd log names `client` in as still running (JackServer's
// xruns_while_running() says why only those): `ours`, and two kinds the
// machine caused, which the log alone cannot tell from ours:
// - `stalled`: in a cycle whose own thread jackd logged as stalled for a
//   quarter of a period (`period_us`) or more;
// - `held`: logged at a time when the stall probe (stall_probe.h) had seen
//   a CPU held for a quarter of a period or more within the two periods
//   before. jackd checks a cycle's clients one period after it woke them;
//   a client still running then was woken in that period, and the line
//   reaches the reader soon after: a stall that held the client overlaps
//   [line - 2 periods, line].
struct RunningXruns {
    int ours = 0, stalled = 0, held = 0;
};
inline RunningXruns running_xruns_in(const std::vector<StampedLine>& log, const std::string& client,
                                     double period_us,
                                     const std::vector<MachineStall>& stalls = {}) {
    const std::string stall = "JackTimedDriver::Process XRun = ";
    const std::string running =
        "JackEngine::XRun: client = " + client + " was not finished, state = Running";
    const auto period_ns = static_cast<std::int64_t>(1e3 * period_us);
    const auto machine_held_cpu_before = [&](std::int64_t t) {
        return std::any_of(stalls.begin(), stalls.end(), [&](const MachineStall& s) {
            return s.micros() >= period_us / 4 && s.to_ns >= t - 2 * period_ns && s.from_ns <= t;
        });
    };
    RunningXruns r;
    double stall_us = 0;  // the current cycle's own stall, if it logged one
    for (const auto& [t, line] : log) {
        if (line.rfind(stall, 0) == 0) {
            stall_us = std::atof(line.c_str() + stall.size());
        } else if (line.find("Process error") != std::string::npos) {
            stall_us = 0;  // the cycle's list of clients ends here
        } else if (line == running) {
            if (stall_us >= period_us / 4)
                ++r.stalled;
            else if (machine_held_cpu_before(t))
                ++r.held;
            else
                ++r.ours;
        }
    }
    return r;
}

// jackd -n NAME -d dummy -r RATE -p PERIOD, real-time (-R) when root.
//
// NAME is etude-test-TAG-PID, so that test programs running at once do not
// share a server. A test whose server dies with a client still connected
// passes `reused_name`: such a jackd leaves its entry in JACK's server
// registry (/dev/shm/jack-shm-registry), which has 8 places and frees a dead
// server's place only when a server of the same name starts. With a name
// per process such entries piled up (8 dead servers of that test after 13
// runs of it), and then no jackd could start ("Too many servers already
// active"); with one name, each run frees the last one's place.
class JackServer {
  public:
    JackServer(int rate, int period, const std::string& tag, bool reused_name = false)
        : period_us_(1e6 * period / rate) {
        name_ = "etude-test-" + tag;
        // Appended in two steps: GCC 12 warns (-Wrestrict, a false positive
        // of its own) on "-" + std::to_string(...) inlined here.
        if (!reused_name) name_.append("-").append(std::to_string(::getpid()));
        std::vector<std::string> args{"jackd", "-n", name_};
        if (::geteuid() == 0) args.push_back("-R");
        for (const char* a : {"-d", "dummy"}) args.emplace_back(a);
        args.insert(args.end(), {"-r", std::to_string(rate), "-p", std::to_string(period)});
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ok_ = spawn(argv.data());
        jack_set_error_function(quiet_jack);
        jack_set_info_function(quiet_jack);
        // Ready when a client can connect.
        for (int i = 0; ok_ && i < 100; ++i) {
            jack_status_t st;
            if (jack_client_t* c = jack_client_open(
                    "probe", static_cast<jack_options_t>(JackNoStartServer | JackServerName), &st,
                    name_.c_str())) {
                jack_client_close(c);
                ready_ = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~JackServer() { stop(); }
    JackServer(const JackServer&) = delete;
    JackServer& operator=(const JackServer&) = delete;
    void stop() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            int st;
            ::waitpid(pid_, &st, 0);
            pid_ = -1;
        }
        if (reader_.joinable()) reader_.join();  // jackd's end of the pipe is closed now
    }
    bool ready() const { return ready_; }
    const std::string& name() const { return name_; }
    std::string log() const {
        std::lock_guard<std::mutex> hold(lines_mutex_);
        std::string text;
        for (const auto& l : lines_) text += l.text + "\n";
        return text;
    }

    // xruns jackd logged, and those that named `client` as not finished.
    int xruns() const { return count("JackEngine::XRun"); }
    int xruns_blaming(const std::string& client) const {
        return count("JackEngine::XRun: client = " + client + " was not finished");
    }
    // Only those where the client's callback was running when the cycle
    // ended ("state = Triggered" means it had not even been scheduled yet:
    // the host's scheduling jitter, which hits trivial clients alike), and
    // the machine was not seen holding a CPU then (below).
    int xruns_while_running(const std::string& client) const { return running_xruns(client).ours; }
    // All three counts at once (RunningXruns): `stalled` are those where
    // the client was running but the server's driver thread was itself
    // held off its CPU for a quarter of a period or more in the same cycle:
    // the machine's. jackd's dummy driver logs "JackTimedDriver::Process
    // XRun = N usec" when its own cycle, from its start to its wait for the
    // next one, took N us, and then names the clients that cycle left
    // unfinished, up to "Process error". Its own work is a few
    // microseconds, and it runs at a real-time priority above every thread
    // of ours (jackd's 10 against a client's 5 and the engine's workers' 4,
    // rt/realtime_thread.h), so nothing of ours can hold it for a quarter
    // period: only the kernel or the VM's host can, and a client running in
    // that cycle was held with it. `held` are those while the stall probe
    // saw a CPU held as long (stall_probe.h): the driver's CPU may run on
    // while the client's is held (CI at 5151fcb: a Piper voice through
    // PortAudio, 2 xruns, no driver stall logged, one "Running", 256
    // samples lost, no underrun).
    RunningXruns running_xruns(const std::string& client) const {
        std::vector<StampedLine> lines;
        {
            std::lock_guard<std::mutex> hold(lines_mutex_);
            lines = lines_;
        }
        // A probe that watched nothing, or missed stalls, vouches for none.
        const bool trusted = probe_.watching() && !probe_.overflowed();
        return running_xruns_in(lines, client, period_us_,
                                trusted ? probe_.stalls() : std::vector<MachineStall>{});
    }
    // What the stall probe saw: how many stalls of a quarter period or more,
    // and the longest, or why it watched nothing.
    std::string stall_report() const {
        if (!probe_.watching()) return "stall probe: not watching (SCHED_FIFO refused)";
        const auto all = probe_.stalls();
        int counted = 0;
        double longest = 0;
        for (const auto& st : all)
            if (st.micros() >= period_us_ / 4) ++counted, longest = std::max(longest, st.micros());
        char text[160];
        std::snprintf(text, sizeof text,
                      "stall probe: %d CPU stall(s) of %.0f us or more, longest %.0f us%s", counted,
                      period_us_ / 4, longest, probe_.overflowed() ? " (list full, not used)" : "");
        return text;
    }

  private:
    // jackd writing into a pipe that reader_ stamps line by line, and told
    // to end when this thread does (PR_SET_PDEATHSIG): a test process
    // killed by its timeout or a crash never runs ~JackServer, and a server
    // it left running would hold one of the registry's 8 places until
    // someone killed it. Between fork and exec only async-signal-safe calls.
    bool spawn(char* const* argv) {
        int out[2];
        if (::pipe2(out, O_CLOEXEC) != 0) return false;
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ < 0) {
            ::close(out[0]);
            ::close(out[1]);
            return false;
        }
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (::getppid() != parent) ::_exit(127);  // the test ended before prctl
            ::dup2(out[1], 1);                        // dup2's copies are not close-on-exec
            ::dup2(out[1], 2);
            ::execvp("jackd", argv);
            ::_exit(127);
        }
        ::close(out[1]);
        reader_ = std::thread([this, fd = out[0]] { read_lines(fd); });
        return true;
    }
    // Above jackd (10) where allowed, so a line is stamped when written.
    void read_lines(int fd) {
        sched_param p{};
        p.sched_priority = MachineStallProbe::kPriority - 1;
        pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
        std::string partial;
        char chunk[4096];
        for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) != 0;) {
            if (n < 0) {
                if (errno == EINTR) continue;
                break;
            }
            const std::int64_t now = rt::now_ns();
            partial.append(chunk, static_cast<std::size_t>(n));
            std::lock_guard<std::mutex> hold(lines_mutex_);
            for (std::size_t eol; (eol = partial.find('\n')) != std::string::npos;) {
                lines_.push_back({now, partial.substr(0, eol)});
                partial.erase(0, eol + 1);
            }
        }
        std::lock_guard<std::mutex> hold(lines_mutex_);
        if (!partial.empty()) lines_.push_back({rt::now_ns(), partial});
        ::close(fd);
    }
    int count(const std::string& needle) const {
        const std::string l = log();
        int n = 0;
        for (auto p = l.find(needle); p != std::string::npos; p = l.find(needle, p + 1)) ++n;
        return n;
    }
    MachineStallProbe probe_;  // from before jackd starts until after it ends
    double period_us_;
    std::string name_;
    mutable std::mutex lines_mutex_;
    std::vector<StampedLine> lines_;
    std::thread reader_;
    pid_t pid_ = -1;
    bool ok_ = false, ready_ = false;
};

// A JACK client with one input port that records into a preallocated buffer.
// It does nothing else: it is also the "trivial client" whose xruns show the
// host's own scheduling jitter.
class CaptureClient {
  public:
    static constexpr const char* kName = "capture";
    CaptureClient(const std::string& server, double seconds) {
        client_ =
            jack_client_open(kName, static_cast<jack_options_t>(JackNoStartServer | JackServerName),
                             nullptr, server.c_str());
        if (!client_) return;
        rate_ = jack_get_sample_rate(client_);
        buffer_.resize(static_cast<std::size_t>(seconds * rate_));
        port_ = jack_port_register(client_, "in", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0);
        jack_set_process_callback(client_, &CaptureClient::process, this);
        jack_activate(client_);
    }
    ~CaptureClient() {
        if (client_) {
            jack_deactivate(client_);
            jack_client_close(client_);
        }
    }
    bool ok() const { return client_ && port_; }
    std::string port() const { return "capture:in"; }
    // Connects `source` to our input once it exists (waits up to `timeout`).
    bool connect_when_present(const std::string& source, std::chrono::milliseconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (jack_port_by_name(client_, source.c_str()))
                return jack_connect(client_, source.c_str(), "capture:in") == 0;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return false;
    }
    std::vector<float> recorded() const {
        return {buffer_.begin(), buffer_.begin() + static_cast<long>(written_.load())};
    }
    std::uint32_t rate() const { return rate_; }
    // Monotonic time (ns) of the first cycle that carried a non-zero
    // sample since the last rearm(), or 0.
    std::int64_t first_sound_ns() const { return first_sound_ns_.load(); }
    void rearm() { first_sound_ns_ = 0; }

  private:
    static int process(jack_nframes_t n, void* self_ptr) {
        auto* self = static_cast<CaptureClient*>(self_ptr);
        const float* in = static_cast<const float*>(jack_port_get_buffer(self->port_, n));
        if (self->first_sound_ns_.load(std::memory_order_relaxed) == 0) {
            for (jack_nframes_t i = 0; i < n; ++i) {
                if (in[i] != 0.0f) {
                    self->first_sound_ns_ = rt::now_ns();
                    break;
                }
            }
        }
        std::size_t w = self->written_.load(std::memory_order_relaxed);
        const std::size_t k = std::min<std::size_t>(n, self->buffer_.size() - w);
        std::copy(in, in + k, self->buffer_.begin() + static_cast<long>(w));
        self->written_.store(w + k, std::memory_order_release);
        return 0;
    }
    jack_client_t* client_ = nullptr;
    jack_port_t* port_ = nullptr;
    std::uint32_t rate_ = 0;
    std::vector<float> buffer_;
    std::atomic<std::size_t> written_{0};
    std::atomic<std::int64_t> first_sound_ns_{0};
};

// Keeps `threads` cores busy until destroyed.
class CpuLoad {
  public:
    explicit CpuLoad(unsigned threads) {
        for (unsigned i = 0; i < threads; ++i)
            workers_.emplace_back([this] {
                volatile double x = 1.0;
                while (!stop_.load(std::memory_order_relaxed))
                    for (int k = 0; k < 10000; ++k) x = x * 1.0000001 + 1e-9;
            });
    }
    ~CpuLoad() {
        stop_ = true;
        for (auto& t : workers_) t.join();
    }

  private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> workers_;
};

struct ProgramRun {
    int status = -1;
    std::string err;
};

// Runs the etude CLI with `args`, stdin from `input_file`, stderr captured;
// kills it after `timeout`.
inline ProgramRun run_etude(const std::string& args, const std::string& input_file,
                            const std::string& env = "", int timeout_s = 120) {
    const std::string err =
        std::string(ETUDE_TEST_TMP) + "/etude-" + std::to_string(::getpid()) + ".err";
    const std::string cmd = env + " timeout -s KILL " + std::to_string(timeout_s) + " " +
                            std::string(ETUDE_CLI_PATH) + " " + args + " < " + input_file +
                            " > /dev/null 2> " + err;
    ProgramRun r;
    const int rc = std::system(cmd.c_str());
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
    r.err = slurp(err);
    return r;
}

// The number after `key` in the etude stats text (e.g. "underruns 0"), or -1.
inline long long stat_value(const std::string& text, const std::string& key) {
    const auto p = text.find(key + " ");
    if (p == std::string::npos) return -1;
    return std::atoll(text.c_str() + p + key.size() + 1);
}

}  // namespace etude::test
