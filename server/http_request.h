// One HTTP/1.x request as the HTTP front end hands it to a worker: its head
// parsed once, by parse_request_head(), and its body whole (a
// Content-Length body; the front end refuses chunked request bodies).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etude::server {

struct HttpRequest {
    std::string method;     // as sent: methods are case-sensitive (RFC 9110, 9.1)
    std::string path;       // the target up to '?', percent-escapes left as sent
    std::string query;      // after '?', empty if none
    int minor_version = 1;  // HTTP/1.0 or HTTP/1.1
    std::vector<std::pair<std::string, std::string>> headers;  // in order, values trimmed
    std::string body;
    std::string peer;  // the client's "HOST:PORT", for the log

    // The first header of that name (case-insensitive), or null.
    const std::string* header(std::string_view name) const;
    // Whether the client asks to close after this request: HTTP/1.1 with
    // "Connection: close", HTTP/1.0 without "Connection: keep-alive".
    bool wants_close() const;
};

// Why a head cannot be taken: the status to answer and a sentence.
struct HeadProblem {
    int status = 400;
    std::string message;
};

// Parses a request head: the request line and the header lines, each ending
// in CRLF, without the blank line that ends the head. Fills `out`'s method,
// path, query, version and headers; on a malformed head returns why (a
// line without a colon, a header name that is no token, a version other
// than HTTP/1.0 or HTTP/1.1, a target that is not an absolute path).
std::optional<HeadProblem> parse_request_head(std::string_view head, HttpRequest& out);

// a == b, ASCII letters compared without case (header names, tokens).
bool equals_ignoring_case(std::string_view a, std::string_view b);

}  // namespace etude::server
