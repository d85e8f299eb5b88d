#include "server/wyoming_server.h"

#include <unistd.h>

#include <vector>

#include "server/connection_limiter.h"
#include "server/event_loop.h"
#include "server/synthesis_pool.h"
#include "server/wyoming_session.h"

namespace etude::server {

WyomingServer::WyomingServer(const ServerContext& context, const Endpoint& endpoint)
    : context_(context), endpoint_(endpoint) {
    if (endpoint.kind != Endpoint::Kind::Stdio) listener_ = std::make_unique<Listener>(endpoint);
}

WyomingServer::~WyomingServer() = default;

std::string WyomingServer::address() const {
    return listener_ ? listener_->address() : "stdio://";
}

void WyomingServer::run(const std::atomic<bool>& stop) {
    EventLoop loop;
    // As many syntheses at once as the slots allow; one client speaks one at
    // a time, so stdio needs one thread.
    SynthesisPool pool(listener_ ? context_.limits.max_syntheses : 1, context_.limits.max_waiting,
                       context_.limits.queue_timeout);
    ConnectionLimiter limiter(context_.limits.max_connections,
                              context_.limits.max_connections_per_address);
    // Indexed by the client's socket (stdio: standard input).
    std::vector<std::unique_ptr<WyomingSession>> sessions;
    std::size_t open = 0;
    const auto add = [&](int fd, std::unique_ptr<WyomingSession> session) {
        if (sessions.size() <= static_cast<std::size_t>(fd)) sessions.resize(fd + 1);
        sessions[fd] = std::move(session);
        ++open;
    };
    const auto settle = [&](int fd) {
        if (sessions[fd] && sessions[fd]->over()) {
            sessions[fd].reset();
            --open;
        }
    };
    if (listener_) {
        loop.watch(listener_->native_handle());
    } else {
        loop.watch(STDIN_FILENO);
        add(STDIN_FILENO,
            std::make_unique<WyomingSession>(STDIN_FILENO, STDOUT_FILENO, false, "stdio",
                                             std::nullopt, context_, pool, loop));
    }

    // One read buffer for every client: the loop reads one at a time.
    // Left uninitialised: it is written before it is read.
    constexpr std::size_t kReadSize = 64 * 1024;
    const std::unique_ptr<char[]> buffer(new char[kReadSize]);
    std::atomic<bool> quit{false};
    bool stopping = false;
    const auto refusal = [](const std::string& why) {
        // Said, not silently dropped: the client learns why.
        return encode_wyoming_event(
            {"error",
             {{"text", "the server refused the connection: " + why}, {"code", "busy"}},
             {}});
    };
    EventLoop::Handlers handlers;
    handlers.ready = [&](int fd, bool readable, bool writable) {
        if (listener_ && fd == listener_->native_handle()) {
            if (stopping) return;
            accept_clients(loop, *listener_, limiter, context_.log, "wyoming", refusal,
                           [&](int client, std::string peer, ConnectionLimiter::Ticket ticket) {
                               loop.watch(client);
                               add(client, std::make_unique<WyomingSession>(
                                               client, client, true, std::move(peer),
                                               std::move(ticket), context_, pool, loop));
                           });
            return;
        }
        if (static_cast<std::size_t>(fd) >= sessions.size() || !sessions[fd]) return;
        if (writable) sessions[fd]->on_writable();
        if (readable) sessions[fd]->on_readable(buffer.get(), kReadSize);
        settle(fd);
    };
    handlers.woken = [&] {
        // A synthesis ended somewhere: a check of each session is cheaper
        // than a queue the pool threads would have to share with the loop.
        for (std::size_t fd = 0; fd < sessions.size(); ++fd)
            if (sessions[fd]) {
                sessions[fd]->on_wake();
                settle(static_cast<int>(fd));
            }
    };
    handlers.tick = [&] {
        pool.expire();
        const auto now = WyomingSession::Clock::now();
        if (stop && !stopping) {
            stopping = true;
            for (auto& s : sessions)
                if (s) s->stop();
        }
        for (std::size_t fd = 0; fd < sessions.size(); ++fd)
            if (sessions[fd]) {
                sessions[fd]->on_wake();
                sessions[fd]->on_tick(now);
                settle(static_cast<int>(fd));
            }
        // Stopping ends once every synthesis has; stdio ends with its client.
        if ((stopping || !listener_) && open == 0) quit = true;
    };
    loop.run(quit, handlers);
}

}  // namespace etude::server
