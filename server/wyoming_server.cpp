#include "server/wyoming_server.h"

#include <condition_variable>
#include <mutex>
#include <thread>

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
    while (!stop) {
        auto connection = listener_->accept(std::chrono::milliseconds(200));
        if (!connection) continue;
        {
            std::lock_guard lock(mu);
            if (open >= context_.limits.max_connections) {
                // Said, not silently dropped: the client learns why.
                connection->write_all(
                    encode_wyoming_event(
                        {"error",
                         {{"text", "the server has too many connections"}, {"code", "busy"}},
                         {}}),
                    std::chrono::milliseconds(100));
                context_.log.write("wyoming " + connection->peer() +
                                   " refused: too many connections");
                continue;
            }
            ++open;
        }
        // Detached, counted: a connection lives as long as its client.
        std::thread([&, c = std::move(*connection)]() mutable {
            run_wyoming_session(std::move(c), context_, stop);
            std::lock_guard lock(mu);
            --open;
            cv.notify_all();
        }).detach();
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open == 0; });
}

}  // namespace etude::server
