// What one client of the event loop has yet to be sent: replies and audio,
// queued by the loop thread (its lock lets another thread send too), written
// at once as far as the socket takes them, never blocking, and the loop
// writes the rest when the socket drains. A client that stops reading costs its
// own connection (dropped after the write timeout), never the loop.
//
// The outbox also owns its socket's interest in the loop (readable,
// writable): a sender asks to hear of a drain while the loop stops reading
// a closing client, and the two must not undo each other.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "server/event_loop.h"

namespace etude::server {

class Outbox {
  public:
    using Clock = std::chrono::steady_clock;
    // Called with the lock held whenever the interest changes; never after
    // kill().
    using SetInterest = std::function<void(EventLoop::Interest)>;

    // A socket: written with MSG_DONTWAIT, the rest once the loop reports it
    // writable. Not a socket (stdio://'s standard output, one client with
    // nothing else to stall): written whole at once, waiting up to
    // `write_timeout`.
    Outbox(int fd, bool is_socket, std::chrono::milliseconds write_timeout,
           SetInterest set_interest);
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;

    // Queues `bytes` and writes what the socket takes now. False when the
    // connection is dead: the peer is gone, or more than kMostQueued bytes
    // wait (a client that sends requests and reads no replies).
    bool send(std::string_view bytes);
    // On the loop thread: the socket is writable.
    void on_writable();
    // On the loop thread: whether the loop reads the client.
    void set_reading(bool reading);
    // On the loop thread, every tick: kills a client that has taken none of
    // what waits for the write timeout. True when dead.
    bool check_stall(Clock::time_point now);
    // Nothing more is sent; waiters wake. Idempotent.
    void kill();
    bool dead() const;
    bool empty() const;
    std::size_t pending() const;  // bytes waiting

    // Never reached by a client the loop stops reading at kPauseReading
    // (its replies are small); a bound all the same.
    static constexpr std::size_t kMostQueued = 1024 * 1024;

  private:
    // With mu_ held: writes what the fd takes; false on a failure.
    bool write_locked();
    void update_interest_locked();

    const int fd_;
    const bool is_socket_;
    const std::chrono::milliseconds write_timeout_;
    SetInterest set_interest_;
    mutable std::mutex mu_;
    std::string pending_;
    std::size_t sent_ = 0;  // of pending_, already written
    Clock::time_point last_progress_ = Clock::now();
    bool reading_ = true, want_write_ = false, dead_ = false;
};

}  // namespace etude::server
