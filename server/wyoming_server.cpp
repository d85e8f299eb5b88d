#include "server/wyoming_server.h"

#include <unistd.h>

#include <vector>

#include "server/connection_limiter.h"
#include "server/event_loop.h"
#include "server/synthesis_queue.h"
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
    // Syntheses as events on this loop: as many at once as the slots allow
    // (shared with the HTTP endpoint), the rest in line.
    SynthesisQueue queue(context_.slots, loop, context_.limits.queue_timeout);
    std::uint64_t serial = 0;
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
                                             std::nullopt, context_, queue, ++serial, loop));
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
                                               std::move(ticket), context_, queue, ++serial, loop));
                           });
            return;
        }
        if (static_cast<std::size_t>(fd) >= sessions.size() || !sessions[fd]) return;
        if (writable) sessions[fd]->on_writable();
        if (readable) sessions[fd]->on_readable(buffer.get(), kReadSize);
        settle(fd);
    };
    // The session a key names, if it is still there.
    const auto session_of = [&](SynthesisQueue::Key key) -> WyomingSession* {
        if (key.fd < 0 || static_cast<std::size_t>(key.fd) >= sessions.size()) return nullptr;
        WyomingSession* s = sessions[key.fd].get();
        return s && s->key() == key ? s : nullptr;
    };
    // Turns freed go to those in line; a turn whose session has gone is
    // given back at once.
    const auto hand_out_turns = [&] {
        queue.settle(
            [&](SynthesisQueue::Key key) {
                WyomingSession* s = session_of(key);
                if (!s || !s->on_turn(true)) {
                    context_.slots.release();
                    return;
                }
                s->on_ready();
                settle(key.fd);
            },
            [&](SynthesisQueue::Key key) {
                if (WyomingSession* s = session_of(key); s && s->on_turn(false)) {
                    s->on_ready();
                    settle(key.fd);
                }
            });
    };
    handlers.woken = [&] {
        // The sessions whose streams rang (audio, or an end), in order.
        for (const SynthesisQueue::Key key : queue.take_ready())
            if (WyomingSession* s = session_of(key)) {
                s->on_ready();
                settle(key.fd);
            }
        hand_out_turns();
    };
    handlers.tick = [&] {
        hand_out_turns();
        const auto now = WyomingSession::Clock::now();
        if (stop && !stopping) {
            stopping = true;
            for (auto& s : sessions)
                if (s) s->stop();
        }
        for (std::size_t fd = 0; fd < sessions.size(); ++fd)
            if (sessions[fd]) {
                // (on_ready() as well as the listener: a bound on any wait.)
                sessions[fd]->on_ready();
                sessions[fd]->on_tick(now);
                settle(static_cast<int>(fd));
            }
        // Stopping ends once every synthesis has; stdio ends with its client.
        if ((stopping || !listener_) && open == 0) quit = true;
    };
    loop.run(quit, handlers);
}

}  // namespace etude::server
