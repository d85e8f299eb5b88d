#include "server/http_front_end.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "engine/error.h"
#include "server/http_reply.h"

namespace etude::server {

namespace {

using Clock = std::chrono::steady_clock;

// A whole reply with OpenAI's error body, closing the connection.
std::string error_reply(int status, const std::string& message, const std::string& code) {
    const std::string body = error_body(status, message, code);
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    if (status == 503) head += "Retry-After: 1\r\n";
    return head +
           "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

struct HttpFrontEnd::Client {
    // Idle: kept alive, no byte of the next request yet. Closing: an error
    // reply sent, reading and dropping what the client still sends so that
    // closing does not reset the connection before the reply is read.
    enum class Stage { Idle, Head, Body, Closing };

    Client(int socket_fd, std::string peer_name, ConnectionLimiter::Ticket t)
        : fd(socket_fd), peer(std::move(peer_name)), ticket(std::move(t)) {}
    ~Client() {
        if (fd >= 0) ::close(fd);
    }

    int fd;
    std::string peer;
    ConnectionLimiter::Ticket ticket;
    Stage stage = Stage::Head;
    Clock::time_point deadline;
    std::string buffer;        // received, not yet handed over
    HttpRequest request;       // the complete request a worker answers
    std::size_t head_end = 0;  // the head's length, blank line included
    std::size_t body_length = 0;
    std::size_t served = 0;  // requests answered on this connection
};

HttpFrontEnd::HttpFrontEnd(const Endpoint& endpoint, const ServerContext& context,
                           std::size_t max_body, std::size_t workers, Handler handler)
    : context_(context),
      listener_(endpoint),
      limiter_(context.limits.max_connections, context.limits.max_connections_per_address),
      max_body_(max_body),
      worker_count_(workers),
      handler_(std::move(handler)) {
    loop_.watch(listener_.native_handle());
}

HttpFrontEnd::~HttpFrontEnd() = default;

void HttpFrontEnd::run(const std::atomic<bool>& stop) {
    for (std::size_t i = 0; i < worker_count_; ++i) workers_.emplace_back([this] { worker(); });
    EventLoop::Handlers handlers;
    handlers.ready = [&](int fd, bool readable, bool) {
        if (fd == listener_.native_handle())
            accept_all();
        else if (readable && static_cast<std::size_t>(fd) < clients_.size() && clients_[fd])
            on_readable(clients_[fd]);
    };
    handlers.woken = [&] { take_back(); };
    handlers.tick = [&] { expire(); };
    loop_.run(stop, handlers);
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    ready_cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    ready_.clear();
    returned_.clear();
    clients_.clear();
}

void HttpFrontEnd::accept_all() {
    accept_clients(
        loop_, listener_, limiter_, context_.log, "http",
        [](const std::string& why) {
            return error_reply(503, "the server refused the connection: " + why, "busy");
        },
        [&](int fd, std::string peer, ConnectionLimiter::Ticket ticket) {
            auto client = std::make_unique<Client>(fd, std::move(peer), std::move(ticket));
            client->deadline = Clock::now() + context_.limits.header_timeout;
            if (clients_.size() <= static_cast<std::size_t>(fd)) clients_.resize(fd + 1);
            loop_.watch(fd);
            clients_[fd] = std::move(client);
        });
}

void HttpFrontEnd::on_readable(ClientPtr& client) {
    // One read per wake-up, of at most 16 KiB: a fast sender cannot keep
    // the loop to itself, and what is buffered grows by that much at most
    // past the caps advance() checks.
    char buf[16 * 1024];
    const ssize_t got = ::recv(client->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (got <= 0) {  // closed or failed: nothing more will come
        loop_.forget(client->fd);
        client.reset();
        return;
    }
    if (client->stage == Client::Stage::Closing) return;  // dropped
    if (client->stage == Client::Stage::Idle) {
        client->stage = Client::Stage::Head;
        client->deadline = Clock::now() + context_.limits.header_timeout;
    }
    client->buffer.append(buf, static_cast<std::size_t>(got));
    advance(client);
}

bool HttpFrontEnd::advance(ClientPtr& client) {
    Client& c = *client;
    if (c.stage == Client::Stage::Head) {
        // Blank lines before a request are allowed (RFC 9112, 2.2).
        const auto first = c.buffer.find_first_not_of("\r\n");
        c.buffer.erase(0, first == std::string::npos ? c.buffer.size() : first);
        auto end = c.buffer.find("\r\n\r\n");
        if (end == std::string::npos) {
            if (c.buffer.size() > kMaxHeadBytes)
                reply_and_close(client, 431, "the request head is over 64 KiB", "head_too_large");
            return false;
        }
        if (end + 4 > kMaxHeadBytes) {
            reply_and_close(client, 431, "the request head is over 64 KiB", "head_too_large");
            return false;
        }
        c.head_end = end + 4;
        c.request = {};
        if (const auto problem =
                parse_request_head(std::string_view(c.buffer).substr(0, end), c.request)) {
            reply_and_close(client, problem->status, problem->message, "bad_request");
            return false;
        }
        c.request.peer = c.peer;
        c.body_length = 0;
        bool has_length = false, expect_continue = false;
        for (const auto& [name, value] : c.request.headers) {
            if (equals_ignoring_case(name, "Transfer-Encoding")) {
                reply_and_close(client, 411,
                                "send the body with a Content-Length (chunked request bodies are "
                                "not taken)",
                                "length_required");
                return false;
            }
            if (equals_ignoring_case(name, "Content-Length")) {
                // Two lengths that differ would let a proxy and us read
                // different bodies (request smuggling): refused.
                if (value.empty() || value.size() > 15 ||
                    value.find_first_not_of("0123456789") != std::string::npos ||
                    (has_length && std::stoull(value) != c.body_length)) {
                    reply_and_close(client, 400, "Content-Length is not one number", "bad_request");
                    return false;
                }
                c.body_length = std::stoull(value);
                has_length = true;
            }
            if (equals_ignoring_case(name, "Expect") && equals_ignoring_case(value, "100-continue"))
                expect_continue = true;  // answered here, where the body is read
        }
        if (c.body_length > max_body_) {
            reply_and_close(client, 413,
                            "the request body is too large (" + std::to_string(c.body_length) +
                                " bytes; the limit is " + std::to_string(max_body_) + ")",
                            "too_large");
            return false;
        }
        if (expect_continue && c.buffer.size() < c.head_end + c.body_length)
            send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
        c.stage = Client::Stage::Body;
        c.deadline = Clock::now() + context_.limits.body_timeout;
    }
    if (c.stage != Client::Stage::Body || c.buffer.size() < c.head_end + c.body_length)
        return false;
    c.request.body = c.buffer.substr(c.head_end, c.body_length);
    c.buffer.erase(0, c.head_end + c.body_length);
    loop_.forget(c.fd);
    hand_over(std::move(client));
    return false;
}

void HttpFrontEnd::reply_and_close(ClientPtr& client, int status, const std::string& message,
                                   const std::string& code) {
    send_now(client->fd, error_reply(status, message, code));
    ::shutdown(client->fd, SHUT_WR);
    context_.log.write("http " + client->peer + " " + std::to_string(status) + ": " + message);
    client->stage = Client::Stage::Closing;
    client->buffer.clear();
    client->buffer.shrink_to_fit();
    client->deadline = Clock::now() + std::chrono::milliseconds(500);
}

void HttpFrontEnd::expire() {
    const auto now = Clock::now();
    for (auto& client : clients_) {
        if (!client || now < client->deadline) continue;
        using Stage = Client::Stage;
        if (client->stage == Stage::Head && !client->buffer.empty())
            reply_and_close(client, 408, "the request head did not arrive within --header-timeout",
                            "header_timeout");
        else if (client->stage == Stage::Body)
            reply_and_close(client, 408, "the request body did not arrive within --body-timeout",
                            "body_timeout");
        else {  // idle, sent nothing, or done with its last words
            loop_.forget(client->fd);
            client.reset();
        }
    }
}

void HttpFrontEnd::hand_over(ClientPtr client) {
    const int fd = client->fd;
    {
        std::lock_guard lock(mu_);
        ready_.push_back(std::move(client));
    }
    ready_cv_.notify_one();
    clients_[fd].reset();  // already moved from; the slot is free
}

void HttpFrontEnd::take_back() {
    std::deque<ClientPtr> back;
    {
        std::lock_guard lock(mu_);
        back.swap(returned_);
    }
    for (auto& client : back) {
        const int fd = client->fd;
        client->request = {};
        client->stage = client->buffer.empty() ? Client::Stage::Idle : Client::Stage::Head;
        client->deadline =
            Clock::now() + (client->buffer.empty() ? std::chrono::seconds(kKeepAliveSeconds)
                                                   : context_.limits.header_timeout);
        if (clients_.size() <= static_cast<std::size_t>(fd)) clients_.resize(fd + 1);
        loop_.watch(fd);
        clients_[fd] = std::move(client);
        // A pipelined request may be whole already.
        if (clients_[fd]->stage == Client::Stage::Head) advance(clients_[fd]);
    }
}

void HttpFrontEnd::worker() {
    for (;;) {
        ClientPtr client;
        {
            std::unique_lock lock(mu_);
            ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
            if (stopping_) return;
            client = std::move(ready_.front());
            ready_.pop_front();
        }
        const bool last = ++client->served >= kKeepAliveMax;
        bool keep = false;
        try {
            keep = handler_(client->fd, std::move(client->request), last);
        } catch (const std::exception& e) {
            context_.log.write("http " + client->peer + " request ended by an error: " + e.what());
        }
        if (!keep || last) continue;  // closes the socket, gives the place back
        {
            std::lock_guard lock(mu_);
            if (stopping_) continue;
            returned_.push_back(std::move(client));
        }
        loop_.wake();
    }
}

}  // namespace etude::server
