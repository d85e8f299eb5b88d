// The one event loop both network front ends run on (HTTP: http_front_end.h;
// Wyoming: wyoming_server.h): epoll over many sockets on one thread, a wake
// that other threads may ring, and a tick ten times a second for deadlines.
// A connection that waits (for its next byte, or for its turn to be
// answered) is a socket in this set and a few bytes, never a thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "server/connection_limiter.h"
#include "server/listener.h"
#include "server/server_context.h"

namespace etude::server {

class EventLoop {
  public:
    // Throws etude::Error when the kernel refuses an epoll set or an eventfd.
    EventLoop();
    ~EventLoop();
    EventLoop(const EventLoop&) = delete;
    EventLoop& operator=(const EventLoop&) = delete;

    // What a watched descriptor is reported for. Level-triggered: a socket
    // with unread bytes is reported again on the next turn.
    struct Interest {
        bool read = true;
        bool write = false;
    };
    // Watches `fd`. One epoll cannot watch (a regular file as standard
    // input) is reported readable on every turn instead, as poll() would.
    void watch(int fd, Interest interest);
    void watch(int fd);  // for reading
    // Thread safe: a synthesis thread asks to hear when its socket drains.
    void change(int fd, Interest interest);
    void forget(int fd);
    // Not reported until the next tick (then watched for reading again):
    // a listener out of descriptors stays readable, and would spin the loop.
    void pause_until_tick(int fd);
    // Thread safe: the loop's `woken` handler runs soon on the loop thread.
    void wake();

    struct Handlers {
        std::function<void(int fd, bool readable, bool writable)> ready;
        std::function<void()> woken;
        std::function<void()> tick;  // every kTick, for deadlines
    };
    // Turns until `stop` is true. Handlers run on the calling thread.
    void run(const std::atomic<bool>& stop, const Handlers& handlers);

    // Deadlines are checked this often: a timeout is late by at most this,
    // and no timer is kept per connection.
    static constexpr std::chrono::milliseconds kTick{100};

  private:
    int epoll_fd_ = -1;
    int wake_fd_ = -1;               // eventfd
    std::vector<int> always_ready_;  // watched fds epoll refused (regular files)
    std::vector<int> paused_;        // pause_until_tick()
};

// Accepts the clients waiting on `listener` (at most 256 a call, so that a
// flood of connections cannot starve the clients already open) and admits
// each through `limiter`. A refused client is sent `refusal(why)` without
// blocking and closed; refusals are logged as "PROTOCOL PEER refused: ...",
// at most once a second. Out of descriptors, the listener pauses until the
// next tick (logged as a refusal). `admitted` takes each admitted socket (close-on-exec;
// read and written with MSG_DONTWAIT), its peer name and its place.
void accept_clients(EventLoop& loop, Listener& listener, ConnectionLimiter& limiter,
                    RequestLog& log, const char* protocol,
                    const std::function<std::string(const std::string& why)>& refusal,
                    const std::function<void(int fd, std::string peer,
                                             ConnectionLimiter::Ticket ticket)>& admitted);

// Best effort and never blocking: what does not fit the socket's buffer of
// a client that reads nothing is lost with the connection.
void send_now(int fd, const std::string& bytes);

// Raises the soft limit on open files to the hard limit, so that a server
// can hold `connections` sockets (each one descriptor). Returns a line for
// the log when even the hard limit leaves fewer than that (with a margin for
// the engine's own files), else "".
std::string raise_open_file_limit(std::size_t connections);

}  // namespace etude::server
