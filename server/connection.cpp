#include "server/connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <utility>

namespace etude::server {

Connection::Connection(int socket_fd, std::string peer)
    : Connection(socket_fd, socket_fd, true, std::move(peer)) {
    is_socket_ = true;
}

Connection::Connection(int in_fd, int out_fd, bool owns, std::string peer)
    : in_fd_(in_fd), out_fd_(out_fd), owns_(owns), peer_(std::move(peer)) {}

Connection Connection::stdio() {
    return Connection(STDIN_FILENO, STDOUT_FILENO, false, "stdio");
}

Connection::Connection(Connection&& other) noexcept
    : in_fd_(std::exchange(other.in_fd_, -1)),
      out_fd_(std::exchange(other.out_fd_, -1)),
      owns_(std::exchange(other.owns_, false)),
      is_socket_(other.is_socket_),
      peer_(std::move(other.peer_)) {}

Connection::~Connection() {
    if (owns_ && in_fd_ >= 0) ::close(in_fd_);
}

Connection::ReadStatus Connection::read_some(char* buf, std::size_t size,
                                             std::chrono::milliseconds timeout, std::size_t& n) {
    n = 0;
    pollfd p{in_fd_, POLLIN, 0};
    int r;
    do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    while (r < 0 && errno == EINTR);
    if (r < 0) return ReadStatus::Failed;
    if (r == 0) return ReadStatus::TimedOut;
    ssize_t got;
    do got = ::read(in_fd_, buf, size);
    while (got < 0 && errno == EINTR);
    if (got < 0) return errno == EAGAIN ? ReadStatus::TimedOut : ReadStatus::Failed;
    if (got == 0) return ReadStatus::Closed;
    n = static_cast<std::size_t>(got);
    return ReadStatus::Data;
}

bool Connection::write_all(std::string_view bytes, std::chrono::milliseconds timeout) {
    while (!bytes.empty()) {
        pollfd p{out_fd_, POLLOUT, 0};
        int r;
        do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
        while (r < 0 && errno == EINTR);
        if (r <= 0) return false;  // stalled for `timeout`, or poll failed
        if (p.revents & (POLLERR | POLLNVAL)) return false;
        ssize_t put;
        do
            put = is_socket_
                      ? ::send(out_fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT)
                      : ::write(out_fd_, bytes.data(), bytes.size());
        while (put < 0 && errno == EINTR);
        if (put < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) continue;
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(put));
    }
    return true;
}

void Connection::close_after_last_message(std::chrono::milliseconds timeout) {
    if (!is_socket_ || in_fd_ < 0) return;
    ::shutdown(out_fd_, SHUT_WR);
    const auto until = std::chrono::steady_clock::now() + timeout;
    char sink[4096];
    std::size_t dropped = 0;
    while (dropped < (1u << 20)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        std::size_t n = 0;
        if (read_some(sink, sizeof sink, left, n) != ReadStatus::Data) break;
        dropped += n;
    }
}

void Connection::shut_down() {
    if (is_socket_ && in_fd_ >= 0) ::shutdown(in_fd_, SHUT_RDWR);
}

}  // namespace etude::server
