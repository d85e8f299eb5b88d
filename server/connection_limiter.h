// How many connections a listener holds, in all and from one client
// address: past either, a new connection is refused at once, so a client
// (or one host's many clients) that opens connections and sends nothing
// cannot take every place. Refusals are counted and reported at most once
// a second, so a flood of them cannot flood the log too. Thread safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace etude::server {

class ConnectionLimiter {
  public:
    ConnectionLimiter(std::size_t max_total, std::size_t max_per_address)
        : max_total_(max_total), max_per_address_(max_per_address) {}
    ConnectionLimiter(const ConnectionLimiter&) = delete;
    ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

    // A place held; given back when the ticket is destroyed. Move-only.
    class Ticket {
      public:
        Ticket(Ticket&& other) noexcept
            : owner_(std::exchange(other.owner_, nullptr)), address_(std::move(other.address_)) {}
        Ticket& operator=(Ticket&&) = delete;
        Ticket(const Ticket&) = delete;
        ~Ticket() {
            if (owner_) owner_->release(address_);
        }

      private:
        friend class ConnectionLimiter;
        Ticket(ConnectionLimiter* owner, std::string address)
            : owner_(owner), address_(std::move(address)) {}
        ConnectionLimiter* owner_;
        std::string address_;
    };

    // A place for a client at `address` (a host, no port: "127.0.0.1",
    // "::1"; "unix" for a Unix socket, which only the total limits), or
    // nothing with `why` saying which limit refused it.
    std::optional<Ticket> admit(const std::string& address, std::string& why) {
        std::lock_guard lock(mu_);
        if (open_ >= max_total_) {
            why = "too many connections (limit " + std::to_string(max_total_) + ")";
            ++refused_;
            return std::nullopt;
        }
        if (address != "unix") {
            auto& n = per_address_[address];
            if (n >= max_per_address_) {
                why = "too many connections from " + address + " (limit " +
                      std::to_string(max_per_address_) + " per address)";
                ++refused_;
                return std::nullopt;
            }
            ++n;
        }
        ++open_;
        return Ticket(this, address);
    }

    // A line for the log after a refusal, or nothing when one was given
    // less than a second before `now` (the next says how many it stands for).
    std::optional<std::string> refusal_report(
        const std::string& why,
        std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
        std::lock_guard lock(mu_);
        if (now - last_report_ < std::chrono::seconds(1)) return std::nullopt;
        last_report_ = now;
        std::string line = "refused: " + why;
        if (refused_ > 1) line += " (" + std::to_string(refused_) + " refused since the last line)";
        refused_ = 0;
        return line;
    }

    std::size_t open() const {
        std::lock_guard lock(mu_);
        return open_;
    }

  private:
    void release(const std::string& address) {
        std::lock_guard lock(mu_);
        --open_;
        if (address == "unix") return;
        const auto it = per_address_.find(address);
        if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
    }

    mutable std::mutex mu_;
    const std::size_t max_total_, max_per_address_;
    std::size_t open_ = 0;
    std::map<std::string, std::size_t> per_address_;
    std::size_t refused_ = 0;
    std::chrono::steady_clock::time_point last_report_{};
};

// The host part of a peer name as Listener writes it ("127.0.0.1:3341",
// "[::1]:3341", "unix"): the key the per-address limit counts by.
inline std::string peer_host(const std::string& peer) {
    const auto colon = peer.rfind(':');
    if (peer == "unix" || colon == std::string::npos) return peer;
    std::string host = peer.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    return host;
}

}  // namespace etude::server
