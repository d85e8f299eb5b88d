// A Wyoming endpoint: accepts clients on a TCP or Unix socket (each on a
// thread of its own, all sharing the context's engine and slots), or serves
// the one client on standard input and output.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/listener.h"
#include "server/server_context.h"

namespace etude::server {

class WyomingServer {
  public:
    // Binds now (throws etude::Error on a bad or busy address).
    WyomingServer(const ServerContext& context, const Endpoint& endpoint);
    ~WyomingServer();
    // "tcp://127.0.0.1:10200", "unix://PATH" or "stdio://".
    std::string address() const;
    // Serves until `stop` is true (stdio: until the client closes, too);
    // then waits for the connections still open to end.
    void run(const std::atomic<bool>& stop);

  private:
    const ServerContext& context_;
    Endpoint endpoint_;
    std::unique_ptr<Listener> listener_;
};

}  // namespace etude::server
