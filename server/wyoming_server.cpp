#include "server/wyoming_server.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/connection_limiter.h"
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
    if (!listener_) {
        run_wyoming_session(Connection::stdio(), context_, stop);
        return;
    }
    std::mutex mu;
    std::condition_variable cv;
    std::size_t open = 0;
    ConnectionLimiter limiter(context_.limits.max_connections,
                              context_.limits.max_connections_per_address);
    while (!stop) {
        auto connection = listener_->accept(std::chrono::milliseconds(200));
        if (!connection) continue;
        std::string why;
        auto ticket = limiter.admit(peer_host(connection->peer()), why);
        if (!ticket) {
            // Said, not silently dropped: the client learns why. Never
            // blocking: a client that reads nothing loses the message.
            connection->write_all(
                encode_wyoming_event(
                    {"error",
                     {{"text", "the server refused the connection: " + why}, {"code", "busy"}},
                     {}}),
                std::chrono::milliseconds(0));
            if (auto line = limiter.refusal_report(why))
                context_.log.write("wyoming " + connection->peer() + " " + *line);
            continue;
        }
        {
            std::lock_guard lock(mu);
            ++open;
        }
        // Detached, counted: a connection lives as long as its client.
        std::thread([&, c = std::move(*connection), t = std::move(*ticket)]() mutable {
            run_wyoming_session(std::move(c), context_, stop);
            { auto given_back = std::move(t); }
            std::lock_guard lock(mu);
            --open;
            cv.notify_all();
        }).detach();
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open == 0; });
}

}  // namespace etude::server
