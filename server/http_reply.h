// A reply to one HttpRequest, and its writing to the client's socket: a
// whole body with Content-Length, or a body streamed with chunked transfer
// as it is made (the speech). Written by the worker that answers the
// request; each write waits at most the write timeout for room.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etude::server {

struct HttpReply {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // beside the framing ones
    std::string content_type;
    std::string body;
    // A streamed body: called once, with `write` for each piece (false: the
    // client is gone or too slow). Returns true when the body is complete;
    // false cuts the reply (no last chunk: the client sees it end early).
    using Write = std::function<bool(std::string_view)>;
    std::function<bool(const Write& write)> stream;

    void set_content(std::string content, std::string type) {
        body = std::move(content);
        content_type = std::move(type);
    }
    void set_header(std::string name, std::string value) {
        headers.emplace_back(std::move(name), std::move(value));
    }
};

// OpenAI's error shape: {"error": {"message", "type", "param", "code"}};
// `param` names the request field at fault, null when none is.
std::string error_body(int status, const std::string& message, const std::string& code,
                       const std::string& param = {});

// "Not Found" for 404, ...; "Unknown" for a status it does not know.
const char* reason_phrase(int status);

// Writes `reply` on the connected socket `fd` in answer to a request of
// HTTP/1.`minor_version` (a HEAD request: `head_only`, the head alone).
// `close`: the reply says Connection: close. Returns whether the whole
// reply went out (the connection may then carry another request).
bool write_reply(int fd, const HttpReply& reply, int minor_version, bool head_only, bool close,
                 std::chrono::milliseconds write_timeout);

}  // namespace etude::server
