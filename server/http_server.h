// The OpenAI-style speech endpoint over HTTP (cpp-httplib):
//   POST /v1/audio/speech  {"model", "input", "voice", "response_format", "speed"}
//        -> audio streamed with chunked transfer as the engine makes it
//           (wav, pcm: 16-bit little-endian mono; flac)
//   GET  /v1/audio/voices  -> the voices, as JSON
// A bad request gets a 4xx status and {"error": {"message", "type", "code"}},
// a full server 503 with the same body. docs/server.md has the details.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace etude::server {

class HttpServer {
  public:
    // Binds HOST:PORT now (port 0: any free port); throws etude::Error.
    HttpServer(const ServerContext& context, const std::string& host_port);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;
    // "http://HOST:PORT" with the bound port.
    const std::string& address() const { return address_; }
    // Serves until `stop` is true.
    void run(const std::atomic<bool>& stop);

  private:
    const ServerContext& context_;
    std::unique_ptr<httplib::Server> server_;
    std::string address_;
    std::atomic<bool> stopping_{false};  // replies in progress end at their next audio
};

}  // namespace etude::server
