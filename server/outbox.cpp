#include "server/outbox.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace etude::server {

Outbox::Outbox(int fd, bool is_socket, std::chrono::milliseconds write_timeout,
               SetInterest set_interest)
    : fd_(fd),
      is_socket_(is_socket),
      write_timeout_(write_timeout),
      set_interest_(std::move(set_interest)) {}

bool Outbox::write_locked() {
    while (sent_ < pending_.size()) {
        const char* at = pending_.data() + sent_;
        const std::size_t left = pending_.size() - sent_;
        ssize_t put;
        if (is_socket_) {
            do put = ::send(fd_, at, left, MSG_NOSIGNAL | MSG_DONTWAIT);
            while (put < 0 && errno == EINTR);
            if (put < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        } else {
            pollfd p{fd_, POLLOUT, 0};
            int r;
            do r = ::poll(&p, 1, static_cast<int>(write_timeout_.count()));
            while (r < 0 && errno == EINTR);
            if (r <= 0 || (p.revents & (POLLERR | POLLNVAL))) return false;
            do put = ::write(fd_, at, left);
            while (put < 0 && errno == EINTR);
            if (put < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) continue;
                return false;
            }
        }
        sent_ += static_cast<std::size_t>(put);
        last_progress_ = Clock::now();
    }
    return true;
}

void Outbox::update_interest_locked() {
    if (dead_) return;
    const bool want_write = is_socket_ && sent_ < pending_.size();
    if (sent_ == pending_.size()) {
        pending_.clear();
        sent_ = 0;
    } else if (sent_ >= 64 * 1024) {
        // Written bytes are dropped in large steps, not per send.
        pending_.erase(0, sent_);
        sent_ = 0;
    }
    if (want_write != want_write_) {
        want_write_ = want_write;
        set_interest_({reading_, want_write_});
    }
}

bool Outbox::send(std::string_view bytes) {
    std::lock_guard lock(mu_);
    if (dead_) return false;
    if (pending_.size() - sent_ + bytes.size() > kMostQueued) {
        dead_ = true;
        return false;
    }
    if (sent_ == pending_.size()) last_progress_ = Clock::now();  // the stall clock starts now
    pending_.append(bytes);
    if (!write_locked()) {
        dead_ = true;
        return false;
    }
    update_interest_locked();
    return true;
}

void Outbox::on_writable() {
    std::lock_guard lock(mu_);
    if (dead_) return;
    if (!write_locked()) {
        dead_ = true;
        return;
    }
    update_interest_locked();
}

void Outbox::set_reading(bool reading) {
    std::lock_guard lock(mu_);
    if (dead_ || reading == reading_) return;
    reading_ = reading;
    set_interest_({reading_, want_write_});
}

bool Outbox::check_stall(Clock::time_point now) {
    std::lock_guard lock(mu_);
    if (!dead_ && sent_ < pending_.size() && now - last_progress_ > write_timeout_) {
        dead_ = true;
    }
    return dead_;
}

void Outbox::kill() {
    std::lock_guard lock(mu_);
    dead_ = true;
}

bool Outbox::dead() const {
    std::lock_guard lock(mu_);
    return dead_;
}

std::size_t Outbox::pending() const {
    std::lock_guard lock(mu_);
    return pending_.size() - sent_;
}

bool Outbox::empty() const {
    std::lock_guard lock(mu_);
    return sent_ == pending_.size();
}

}  // namespace etude::server
