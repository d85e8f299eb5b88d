// The module's standard output: replies and events, each written whole.
#pragma once

#include <atomic>
#include <mutex>
#include <string_view>

namespace etude::speechd {

/// Writes protocol messages to a file descriptor, one message at a time.
///
/// The server demultiplexes replies (to LIST VOICES, which may come while
/// speaking) from events by their first line, so a message must never be
/// interleaved with another: each write() of a message holds the mutex for
/// its whole length. The writes may block (the server stops reading while
/// its audio queue is full); nothing that must stay responsive (STOP) takes
/// this mutex, see Speaker.
class ReplyWriter {
  public:
    explicit ReplyWriter(int fd) : fd_(fd) {}
    /// Writes `message` whole under the mutex. False once the pipe is broken.
    bool send(std::string_view message);
    /// The mutex itself, for the one caller that must send a reply and hand
    /// work to the speaking thread as one step (SPEAK's 200, see Protocol).
    std::mutex& mutex() { return mu_; }
    /// Writes with the mutex already held by the caller.
    bool send_locked(std::string_view message);
    bool broken() const { return broken_.load(); }

  private:
    int fd_;
    std::mutex mu_;
    std::atomic<bool> broken_{false};
};

}  // namespace etude::speechd
