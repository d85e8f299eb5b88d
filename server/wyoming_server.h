// A Wyoming endpoint: a TCP or Unix listener whose clients all live on one
// event loop thread (event_loop.h; the HTTP front end runs on the same
// kind), their syntheses on a bounded SynthesisPool; or the one client on
// standard input and output, on the same loop. A connection costs a socket
// and its state, never a thread: a thousand idle clients hold the same
// threads as none.
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
    // then closes the connections and waits for their syntheses to end.
    void run(const std::atomic<bool>& stop);

  private:
    const ServerContext& context_;
    Endpoint endpoint_;
    std::unique_ptr<Listener> listener_;
};

}  // namespace etude::server
