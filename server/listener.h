// Where a server listens: "tcp://HOST:PORT" (port 0: any free port),
// "unix://PATH" or "stdio://" (one client on standard input and output).
#pragma once

#include <string>

namespace etude::server {

struct Endpoint {
    enum class Kind { Tcp, Unix, Stdio } kind = Kind::Tcp;
    std::string host;  // Tcp
    int port = 0;      // Tcp
    std::string path;  // Unix
};

// Throws etude::Error saying what a well-formed address looks like.
Endpoint parse_endpoint(const std::string& uri);

// A listening TCP or Unix socket (not stdio).
class Listener {
  public:
    // Binds and listens; throws etude::Error naming the address and the reason.
    explicit Listener(const Endpoint& endpoint);
    ~Listener();  // closes, and removes a Unix socket file it made
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    // For an event loop: the listening socket (to wait on), and the next
    // client if one is there now, as a connected socket (close-on-exec,
    // TCP_NODELAY) and its peer name; -1 (errno set) when none is.
    int native_handle() const { return fd_; }
    int accept_now(std::string& peer);
    // The bound address as a URI, with the real port when 0 was asked for.
    const std::string& address() const { return address_; }

  private:
    int fd_ = -1;
    Endpoint endpoint_;
    std::string address_;
};

}  // namespace etude::server
