#include "server/http_reply.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "server/http_front_end.h"

namespace etude::server {

namespace {

// Sends all of `bytes`, waiting at most `timeout` each time the socket has
// no room; false when the client is gone or stopped reading.
bool send_all(int fd, std::string_view bytes, std::chrono::milliseconds timeout) {
    while (!bytes.empty()) {
        const ssize_t put = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(put));
            continue;
        }
        if (put < 0 && errno == EINTR) continue;
        if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
        pollfd p{fd, POLLOUT, 0};
        int r;
        do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
        while (r < 0 && errno == EINTR);
        if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
    }
    return true;
}

}  // namespace

std::string error_body(int status, const std::string& message, const std::string& code,
                       const std::string& param) {
    return nlohmann::json{
        {"error",
         {{"message", message},
          {"type", status == 503 ? "server_busy" : "invalid_request_error"},
          {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
          {"code", code}}}}
        .dump();
}

// Now as HTTP's Date header gives it (RFC 9110, 5.6.7: IMF-fixdate, in
// English whatever the locale).
std::string http_date() {
    static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    const std::time_t now = std::time(nullptr);
    std::tm t{};
    gmtime_r(&now, &t);
    char out[40];
    std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[t.tm_wday % 7],
                  t.tm_mday, kMonths[t.tm_mon % 12], t.tm_year + 1900, t.tm_hour, t.tm_min,
                  t.tm_sec);
    return out;
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100:
            return "Continue";
        case 200:
            return "OK";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 411:
            return "Length Required";
        case 413:
            return "Payload Too Large";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 503:
            return "Service Unavailable";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Unknown";
    }
}

bool write_reply(int fd, const HttpReply& reply, int minor_version, bool head_only, bool close,
                 std::chrono::milliseconds write_timeout) {
    // An HTTP/1.0 client knows no chunked transfer: its streamed body ends
    // with the connection instead.
    const bool chunked = reply.stream && minor_version >= 1;
    close = close || (reply.stream && !chunked);
    std::string head =
        "HTTP/1.1 " + std::to_string(reply.status) + " " + reason_phrase(reply.status) + "\r\n";
    head += "Date: " + http_date() + "\r\n";
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
    if (!reply.content_type.empty()) head += "Content-Type: " + reply.content_type + "\r\n";
    if (chunked)
        head += "Transfer-Encoding: chunked\r\n";
    else if (!reply.stream)
        head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
    if (close)
        head += "Connection: close\r\n";
    else
        head += "Connection: keep-alive\r\nKeep-Alive: timeout=" +
                std::to_string(HttpFrontEnd::kKeepAliveSeconds) +
                ", max=" + std::to_string(HttpFrontEnd::kKeepAliveMax) + "\r\n";
    head += "\r\n";
    if (head_only || !reply.stream) {
        if (!head_only) head += reply.body;  // one send for a small reply
        return send_all(fd, head, write_timeout) && !close;
    }
    if (!send_all(fd, head, write_timeout)) return false;
    std::string chunk;  // one send per piece: its size line, the piece, CRLF
    const HttpReply::Write write = [&](std::string_view piece) {
        if (piece.empty()) return true;  // an empty chunk would end the body
        if (!chunked) return send_all(fd, piece, write_timeout);
        char size[24];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
        chunk.assign(size, static_cast<std::size_t>(n));
        chunk.append(piece);
        chunk += "\r\n";
        return send_all(fd, chunk, write_timeout);
    };
    if (!reply.stream(write)) return false;
    return (!chunked || send_all(fd, "0\r\n\r\n", write_timeout)) && !close;
}

}  // namespace etude::server
