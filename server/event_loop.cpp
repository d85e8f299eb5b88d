#include "server/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace etude::server {

namespace {

std::uint32_t epoll_events(EventLoop::Interest interest) {
    return (interest.read ? EPOLLIN : 0u) | (interest.write ? EPOLLOUT : 0u);
}

}  // namespace

EventLoop::EventLoop() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
        const std::string why = std::strerror(errno);
        if (epoll_fd_ >= 0) ::close(epoll_fd_);
        if (wake_fd_ >= 0) ::close(wake_fd_);
        throw Error("cannot make the server's event loop: " + why);
    }
    watch(wake_fd_);
}

EventLoop::~EventLoop() {
    ::close(epoll_fd_);
    ::close(wake_fd_);
}

void EventLoop::watch(int fd, Interest interest) {
    epoll_event ev{};
    ev.events = epoll_events(interest);
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) < 0 && errno == EPERM)
        always_ready_.push_back(fd);
}

void EventLoop::watch(int fd) {
    watch(fd, Interest{});
}

void EventLoop::change(int fd, Interest interest) {
    epoll_event ev{};
    ev.events = epoll_events(interest);
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::forget(int fd) {
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    always_ready_.erase(std::remove(always_ready_.begin(), always_ready_.end(), fd),
                        always_ready_.end());
}

void EventLoop::pause_until_tick(int fd) {
    change(fd, Interest{.read = false});
    paused_.push_back(fd);
}

void EventLoop::wake() {
    const std::uint64_t one = 1;
    (void)::write(wake_fd_, &one, sizeof one);
}

void EventLoop::run(const std::atomic<bool>& stop, const Handlers& handlers) {
    std::vector<epoll_event> events(256);
    auto next_tick = std::chrono::steady_clock::now();
    while (!stop) {
        const int wait_ms = always_ready_.empty() ? static_cast<int>(kTick.count()) : 0;
        const int n =
            ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
        for (int i = 0; i < n; ++i) {
            const int fd = events[i].data.fd;
            if (fd == wake_fd_) {
                std::uint64_t count;
                (void)::read(wake_fd_, &count, sizeof count);
                handlers.woken();
                continue;
            }
            // A hang-up or an error is reported as readable: the read that
            // follows finds the end or the error.
            const auto e = events[i].events;
            handlers.ready(fd, (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0, (e & EPOLLOUT) != 0);
        }
        // Copied: a handler may forget its fd.
        for (const int fd : std::vector<int>(always_ready_)) handlers.ready(fd, true, false);
        if (std::chrono::steady_clock::now() >= next_tick) {
            for (const int fd : paused_) change(fd, Interest{});
            paused_.clear();
            handlers.tick();
            next_tick = std::chrono::steady_clock::now() + kTick;
        }
    }
}

void accept_clients(EventLoop& loop, Listener& listener, ConnectionLimiter& limiter,
                    RequestLog& log, const char* protocol,
                    const std::function<std::string(const std::string& why)>& refusal,
                    const std::function<void(int fd, std::string peer,
                                             ConnectionLimiter::Ticket ticket)>& admitted) {
    for (int i = 0; i < 256; ++i) {
        std::string peer;
        const int fd = listener.accept_now(peer);
        if (fd < 0) {
            // Out of descriptors: said, since the client waits in the
            // backlog unanswered until a connection closes.
            if (errno == EMFILE || errno == ENFILE) {
                loop.pause_until_tick(listener.native_handle());
                if (auto line = limiter.refusal_report(
                        "no file descriptor left (the open-file limit; docs/server.md)"))
                    log.write(std::string(protocol) + " " + *line);
            }
            return;
        }
        std::string why;
        auto ticket = limiter.admit(peer_host(peer), why);
        if (!ticket) {
            send_now(fd, refusal(why));
            ::close(fd);
            if (auto line = limiter.refusal_report(why))
                log.write(std::string(protocol) + " " + peer + " " + *line);
            continue;
        }
        admitted(fd, std::move(peer), std::move(*ticket));
    }
}

void send_now(int fd, const std::string& bytes) {
    (void)::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

std::string raise_open_file_limit(std::size_t connections) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    }
    // The engine, its voices, the listeners and the loops hold descriptors
    // of their own: a few dozen; 64 covers them with room.
    constexpr rlim_t kOwnFiles = 64;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= connections + kOwnFiles) return {};
    const std::size_t fit =
        limit.rlim_cur > kOwnFiles ? static_cast<std::size_t>(limit.rlim_cur - kOwnFiles) : 0;
    return "the open-file limit is " + std::to_string(limit.rlim_cur) +
           " (its hard limit): about " + std::to_string(fit) + " connections fit, not the " +
           std::to_string(connections) +
           " --max-connections allows; raise it (ulimit -n, systemd LimitNOFILE=)";
}

}  // namespace etude::server
