// One client's byte stream: a connected socket, or standard input and
// output. Reads and writes wait at most a given time, so a silent or stuck
// peer costs its own connection a timeout and nothing else.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace etude::server {

class Connection {
  public:
    // Takes ownership of a connected socket; `peer` names it in logs.
    Connection(int socket_fd, std::string peer);
    // Standard input and output (the stdio:// endpoint); not closed at the end.
    static Connection stdio();
    ~Connection();
    Connection(Connection&& other) noexcept;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    Connection& operator=(Connection&&) = delete;

    enum class ReadStatus { Data, Closed, TimedOut, Failed };
    // Waits up to `timeout` for bytes; on Data, `n` holds how many.
    ReadStatus read_some(char* buf, std::size_t size, std::chrono::milliseconds timeout,
                         std::size_t& n);
    // Writes everything or fails: false on a peer that is gone, or that took
    // none of it for `timeout` (a stalled reader). Thread safe with respect
    // to read_some(); callers serialise writes among themselves.
    bool write_all(std::string_view bytes, std::chrono::milliseconds timeout);
    // Ends both directions now: a read_some() waiting in another thread
    // returns at once. Idempotent.
    void shut_down();
    // Ends our side after a last message, then reads and drops what the
    // peer still sends for up to `timeout` (or until it closes), so that
    // closing with its bytes unread does not reset the connection and
    // destroy that last message before the peer reads it.
    void close_after_last_message(std::chrono::milliseconds timeout);

    const std::string& peer() const { return peer_; }

  private:
    Connection(int in_fd, int out_fd, bool owns, std::string peer);
    int in_fd_ = -1, out_fd_ = -1;
    bool owns_ = false;
    bool is_socket_ = false;
    std::string peer_;
};

}  // namespace etude::server
