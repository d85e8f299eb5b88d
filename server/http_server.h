// The OpenAI-style speech endpoint over HTTP (requests read and parsed by
// http_front_end.h, replies written by http_reply.h):
//   POST /v1/audio/speech  {"model", "input", "voice", "response_format", "speed",
//                           "instructions" (taken, not used), "sample_rate" (ours)}
//        -> audio streamed with chunked transfer as the engine makes it
//           (mp3, the default; opus; wav, pcm: 16-bit little-endian mono; flac)
//   GET  /v1/models        -> the voices as OpenAI's model objects
//   GET  /v1/models/ID     -> one of them (404 model_not_found for another)
//   GET  /v1/audio/voices  -> the voices, as JSON
// With an API key every request needs `Authorization: Bearer KEY` (else 401;
// the scheme's name in any case).
// A bad request gets a 4xx status and
// {"error": {"message", "type", "param", "code"}}, a full server 503 with the
// same body. docs/server.md has the details.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http_front_end.h"
#include "server/http_reply.h"
#include "server/http_request.h"
#include "server/server_context.h"

namespace etude::server {

// The key in an API key file: its one word, white space around it dropped;
// throws etude::Error naming the file when it cannot be read or is empty.
std::string read_api_key(const std::string& path);

class HttpServer {
  public:
    // Binds HOST:PORT now (port 0: any free port); throws etude::Error.
    // `api_key`: empty, no key is asked for.
    HttpServer(const ServerContext& context, const std::string& host_port,
               std::string api_key = {});
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;
    // "http://HOST:PORT" with the bound port.
    const std::string& address() const { return address_; }
    // Serves until `stop` is true.
    void run(const std::atomic<bool>& stop);

  private:
    // HttpFrontEnd's handler: answers one complete request on `fd`.
    bool answer(int fd, const HttpRequest& req, bool last) const;
    // The endpoint and method: 404 for an unknown path, 405 for a method
    // the path does not take (HEAD as GET, without the body).
    void route(const HttpRequest& req, HttpReply& res) const;
    void list_models(const HttpRequest& req, HttpReply& res) const;
    void retrieve_model(const HttpRequest& req, HttpReply& res) const;
    // A voice as OpenAI's model object.
    nlohmann::json model_object(const VoiceEntry& voice) const;
    void list_voices(const HttpRequest& req, HttpReply& res) const;
    void speak(const HttpRequest& req, HttpReply& res) const;
    bool stopping() const { return stop_ && stop_->load(); }
    // True with the right key (or none asked for); else answers 401.
    bool authorized(const HttpRequest& req, HttpReply& res) const;

    const ServerContext& context_;
    std::unique_ptr<HttpFrontEnd> front_end_;
    std::string address_;
    const std::string api_key_;
    const long long created_;  // the models' "created": when the server started
    // Set by run(): replies in progress end at their next audio once it is true.
    const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace etude::server
