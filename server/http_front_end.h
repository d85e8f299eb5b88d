// The HTTP endpoint's front door: one thread accepts the connections and
// reads every request's head and body itself (event_loop.h, never blocking), under
// deadlines and limits, parses its head once (http_request.h), and hands a
// request to a worker only once it is whole. A connection that sends half a request line, or
// trickles a byte a second, holds a socket and its few bytes until its deadline, never a worker or
// a synthesis slot; the workers only answer complete requests. docs/server.md ("Slow and idle
// clients") says why it is built this way.
//
// What it checks before a request reaches a worker: connections in all and
// per client address (ConnectionLimiter), the head within --header-timeout
// (64 KiB at most, else 431), the body within --body-timeout (a
// Content-Length body; chunked request bodies get 411, a length over the
// cap 413), 408 on a deadline with part of a request read. A kept-alive
// connection waits 5 s for its next request, then closes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/connection_limiter.h"
#include "server/event_loop.h"
#include "server/http_request.h"
#include "server/listener.h"
#include "server/server_context.h"

namespace etude::server {

class HttpFrontEnd {
  public:
    // Answers one complete request (its head parsed, its body whole) on a
    // connected socket it must not close; `last`: it must ask the client to
    // close. Returns whether the connection may carry another request.
    using Handler = std::function<bool(int socket_fd, HttpRequest request, bool last)>;

    // Binds now (throws etude::Error). `workers` answer requests at once;
    // more complete requests wait for one in arrival order.
    HttpFrontEnd(const Endpoint& endpoint, const ServerContext& context, std::size_t max_body,
                 std::size_t workers, Handler handler);
    ~HttpFrontEnd();
    HttpFrontEnd(const HttpFrontEnd&) = delete;
    HttpFrontEnd& operator=(const HttpFrontEnd&) = delete;

    // "tcp://HOST:PORT" with the bound port.
    const std::string& address() const { return listener_.address(); }
    int native_listening_socket() const { return listener_.native_handle(); }
    // Serves until `stop`; then closes what waits and joins the workers
    // (a reply in progress ends when the handler sees `stop`).
    void run(const std::atomic<bool>& stop);

    // Kept-alive connections: how long one may wait for its next request,
    // and how many requests one carries.
    static constexpr int kKeepAliveSeconds = 5;
    static constexpr std::size_t kKeepAliveMax = 100;
    static constexpr std::size_t kMaxHeadBytes = 64 * 1024;

  private:
    struct Client;
    using ClientPtr = std::unique_ptr<Client>;

    void accept_all();
    void on_readable(ClientPtr& client);
    // Parses what is buffered; returns false when the client is done with
    // (handed to a worker, or closed).
    bool advance(ClientPtr& client);
    void reply_and_close(ClientPtr& client, int status, const std::string& message,
                         const std::string& code);
    void hand_over(ClientPtr client);
    void take_back();
    void expire();
    void worker();

    const ServerContext& context_;
    Listener listener_;
    ConnectionLimiter limiter_;
    const std::size_t max_body_;
    const std::size_t worker_count_;
    Handler handler_;
    EventLoop loop_;                  // woken: a worker gave a kept-alive connection back
    std::vector<ClientPtr> clients_;  // indexed by socket, reading a request

    std::mutex mu_;
    std::condition_variable ready_cv_;
    std::deque<ClientPtr> ready_;     // complete requests for the workers
    std::deque<ClientPtr> returned_;  // kept-alive connections back from the workers
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace etude::server
