#include "gpu/device_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

namespace etude::gpu {
namespace {

// The answer on the pipe: every field as its length in decimal, ':' and its
// bytes, so that a name with any byte in it comes back as it was. A device
// is "D" and its fields, a note "N" and its text; "E" ends a whole answer,
// so a child that died half way is told from one that found nothing.
void put(std::string& out, std::string_view field) {
    out += std::to_string(field.size());
    out += ':';
    out += field;
}

void put_device(std::string& out, const DeviceInfo& d) {
    put(out, "D");
    put(out, std::to_string(static_cast<int>(d.kind)));
    put(out, std::to_string(d.index));
    put(out, d.name);
    put(out, d.vendor);
    put(out, d.platform);
    put(out, d.driver);
    put(out, std::to_string(d.global_memory));
    put(out, std::to_string(d.compute_units));
    put(out, d.is_gpu ? "1" : "0");
    put(out, std::to_string(d.capabilities.size()));
    for (const auto& c : d.capabilities) put(out, c);
}

std::string encode(const DetectedDevices& found) {
    std::string out;
    for (const auto& d : found.devices) put_device(out, d);
    for (const auto& n : found.notes) {
        put(out, "N");
        put(out, n);
    }
    put(out, "E");
    return out;
}

struct Reader {
    std::string_view rest;
    bool ok = true;

    std::string field() {
        const auto colon = rest.find(':');
        if (!ok || colon == std::string_view::npos || colon == 0 || colon > 12) return fail();
        std::size_t size = 0;
        for (char c : rest.substr(0, colon)) {
            if (c < '0' || c > '9') return fail();
            size = size * 10 + static_cast<std::size_t>(c - '0');
        }
        rest.remove_prefix(colon + 1);
        if (size > rest.size()) return fail();
        std::string s(rest.substr(0, size));
        rest.remove_prefix(size);
        return s;
    }
    long long number(long long low, long long high) {
        const std::string s = field();
        if (!ok || s.empty() || s.size() > 19) return fail(), 0;
        long long v = 0;
        for (char c : s) {
            if (c < '0' || c > '9') return fail(), 0;
            v = v * 10 + (c - '0');
        }
        if (v < low || v > high) return fail(), 0;
        return v;
    }
    std::string fail() {
        ok = false;
        return {};
    }
};

std::optional<DetectedDevices> decode(std::string_view text) {
    Reader r{text};
    DetectedDevices found;
    for (;;) {
        const std::string tag = r.field();
        if (!r.ok) return std::nullopt;
        if (tag == "E") return r.rest.empty() ? std::optional(std::move(found)) : std::nullopt;
        if (tag == "N") {
            found.notes.push_back(r.field());
        } else if (tag == "D") {
            DeviceInfo d;
            d.kind = static_cast<BackendKind>(r.number(static_cast<int>(BackendKind::Cpu),
                                                       static_cast<int>(BackendKind::Vulkan)));
            d.index = static_cast<int>(r.number(0, 1 << 20));
            d.name = r.field();
            d.vendor = r.field();
            d.platform = r.field();
            d.driver = r.field();
            d.global_memory = static_cast<std::size_t>(r.number(0, INT64_MAX));
            d.compute_units = static_cast<int>(r.number(0, 1 << 30));
            d.is_gpu = r.number(0, 1) == 1;
            const auto caps = r.number(0, 1000);
            for (long long i = 0; i < caps && r.ok; ++i) d.capabilities.push_back(r.field());
            found.devices.push_back(std::move(d));
        } else {
            return std::nullopt;
        }
    }
}

bool write_all(int fd, const std::string& s) {
    std::size_t done = 0;
    while (done < s.size()) {
        const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// The child: detect, answer, and leave without running this process's exit
// handlers or destructors (they are the parent's).
[[noreturn]] void run_child(int fd, const std::function<DetectedDevices()>& detect) {
    int status = 1;
    try {
        if (write_all(fd, encode(detect()))) status = 0;
    } catch (...) {
    }
    ::_exit(status);
}

// Reads the child's answer until it closes the pipe or `timeout_ms` pass.
// False on a timeout.
bool read_answer(int fd, int timeout_ms, std::string& text) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    char buffer[4096];
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return ready == 0 ? false : true;
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return true;
        text.append(buffer, static_cast<std::size_t>(n));
    }
}

// The child's end, in words for a note.
std::string how_it_ended(pid_t pid) {
    int status = 0;
    pid_t got;
    do got = ::waitpid(pid, &status, 0);
    while (got < 0 && errno == EINTR);
    if (got != pid) return "it could not be waited for";  // SIGCHLD ignored: reaped already
    if (WIFSIGNALED(status)) return std::string("it died of ") + ::strsignal(WTERMSIG(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        return "it failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
    return "its answer could not be read";
}

}  // namespace

std::optional<DetectedDevices> detect_in_child(const std::function<DetectedDevices()>& detect,
                                               int timeout_ms) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return std::nullopt;
    }
    if (pid == 0) {
        ::close(fds[0]);
        run_child(fds[1], detect);
    }
    ::close(fds[1]);
    std::string text;
    const bool answered = read_answer(fds[0], timeout_ms, text);
    ::close(fds[0]);
    if (!answered) ::kill(pid, SIGKILL);
    const std::string ended = how_it_ended(pid);
    if (answered)
        if (auto found = decode(text)) return found;
    DetectedDevices none;
    none.notes.push_back(answered ? "device detection (in a child process) gave no answer: " + ended
                                  : "device detection (in a child process) took over " +
                                        std::to_string(timeout_ms) +
                                        " ms and was stopped: a driver hangs");
    return none;
}

}  // namespace etude::gpu
