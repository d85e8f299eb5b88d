#include "server/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>
#include <thread>

#include "engine/text_check.h"
#include "server/audio_encoding.h"
#include "server/speech_job.h"
#include "server/wyoming_frame.h"

namespace etude::server {

using nlohmann::json;

namespace {

// OpenAI's error shape: {"error": {"message", "type", "param", "code"}};
// `param` names the request field at fault, null when none is.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& code, const std::string& param = {}) {
    res.status = status;
    res.set_content(json{{"error",
                          {{"message", message},
                           {"type", status == 503 ? "server_busy" : "invalid_request_error"},
                           {"param", param.empty() ? json(nullptr) : json(param)},
                           {"code", code}}}}
                        .dump(),
                    "application/json");
}

// Compares a presented key with ours in time that depends on our key's
// length only, never on where the two first differ.
bool same_key(std::string_view presented, std::string_view key) {
    volatile unsigned char diff = presented.size() == key.size() ? 0 : 1;
    for (std::size_t i = 0; i < key.size(); ++i)
        diff = diff |
               static_cast<unsigned char>(key[i] ^ (i < presented.size() ? presented[i] : ~key[i]));
    return diff == 0;
}

// The voices OpenAI's speech endpoint offers. A client may refuse any other
// name before it asks (pipecat's OpenAI service does), so each is accepted
// and means the server's default voice.
bool is_openai_voice(const std::string& name) {
    static const char* const kOpenAiVoices[] = {"alloy", "ash",     "ballad", "cedar", "coral",
                                                "echo",  "fable",   "marin",  "nova",  "onyx",
                                                "sage",  "shimmer", "verse"};
    for (const char* v : kOpenAiVoices)
        if (name == v) return true;
    return false;
}

std::string peer(const httplib::Request& req) {
    return req.remote_addr + ":" + std::to_string(req.remote_port);
}

void socket_name(int fd, bool remote, std::string& ip, int& port) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if ((remote ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)) != 0)
        return;
    char host[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    } else if (addr.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    }
    ip = host;
}

// One complete request, already read by HttpFrontEnd, on its socket: reads
// come from those bytes only (the socket is never read here, so a worker
// never waits for a client's bytes), writes go to the socket, each waiting
// at most the write timeout for room.
class CompleteRequestStream : public httplib::Stream {
  public:
    CompleteRequestStream(int fd, std::string request, std::chrono::milliseconds write_timeout)
        : fd_(fd), request_(std::move(request)), write_timeout_(write_timeout) {}
    bool is_readable() const override { return read_ < request_.size(); }
    bool is_writable() const override {
        pollfd p{fd_, POLLOUT, 0};
        int r;
        do r = ::poll(&p, 1, static_cast<int>(write_timeout_.count()));
        while (r < 0 && errno == EINTR);
        return r > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
    }
    ssize_t read(char* ptr, size_t size) override {
        const std::size_t n = std::min(size, request_.size() - read_);
        std::memcpy(ptr, request_.data() + read_, n);
        read_ += n;
        return static_cast<ssize_t>(n);  // 0 past the request: its end
    }
    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        const ssize_t put = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        return put;  // cpp-httplib writes the rest, or gives up on -1
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        socket_name(fd_, true, ip, port);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        socket_name(fd_, false, ip, port);
    }
    socket_t socket() const override { return fd_; }

  private:
    int fd_;
    std::string request_;
    std::size_t read_ = 0;
    std::chrono::milliseconds write_timeout_;
};

}  // namespace

// cpp-httplib's routing, parsing and replies, without its accept loop and
// its thread per connection: HttpFrontEnd reads the requests, and a worker
// hands each whole one here (process_request() is protected, for SSLServer,
// which feeds it its own Stream as we do).
class HttpServer::RequestProcessor : public httplib::Server {
  public:
    explicit RequestProcessor(int listening_socket) {
        // cpp-httplib takes an invalid listening socket for "shutting down"
        // and then ends a chunked reply before its first chunk; we never
        // let it listen, so it is told of ours.
        svr_sock_ = listening_socket;
    }
    // Whether the connection may carry another request.
    bool answer(httplib::Stream& stream, bool last) {
        bool closed = false;
        const bool ok = process_request(stream, last, closed, nullptr);
        return ok && !closed;
    }
};

std::string read_api_key(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read the API key file " + path + ": " + std::strerror(errno));
    std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A file written by `echo KEY > FILE` ends in a newline that is no part of the key.
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.front()))) key.erase(0, 1);
    if (key.empty()) throw Error("the API key file " + path + " is empty");
    if (key.find_first_of(" \t\r\n") != std::string::npos)
        throw Error("the API key in " + path + " has white space inside; a key is one word");
    return key;
}

HttpServer::HttpServer(const ServerContext& context, const std::string& host_port,
                       std::string api_key)
    : context_(context),
      api_key_(std::move(api_key)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos || colon + 1 == host_port.size() ||
        host_port.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
        host_port.size() - colon > 6)
        throw Error("'" + host_port + "' is not HOST:PORT");
    Endpoint endpoint;
    endpoint.host = host_port.substr(0, colon);
    if (endpoint.host.empty()) endpoint.host = "0.0.0.0";
    if (endpoint.host.size() >= 2 && endpoint.host.front() == '[' && endpoint.host.back() == ']')
        endpoint.host = endpoint.host.substr(1, endpoint.host.size() - 2);
    endpoint.port = std::stoi(host_port.substr(colon + 1));
    if (endpoint.port > 65535)
        throw Error("port " + std::to_string(endpoint.port) + " is out of range");

    const auto& limits = context_.limits;
    // One worker per request that may run or wait for a turn, and a few
    // for the quick ones (voices, errors); more whole requests wait for a
    // worker in the front end, in arrival order.
    const std::size_t workers = limits.max_syntheses + limits.max_waiting + 4;
    const std::size_t max_body = limits.max_text_bytes * 2 + 4096;
    try {
        front_end_ = std::make_unique<HttpFrontEnd>(
            endpoint, context_, max_body, workers, [this](int fd, std::string request, bool last) {
                CompleteRequestStream stream(fd, std::move(request), context_.limits.write_timeout);
                return server_->answer(stream, last);
            });
    } catch (const Error& e) {
        const std::string why = e.what();  // "cannot listen on tcp://...": say http://
        const auto at = why.find("tcp://");
        throw Error(at == std::string::npos ? why
                                            : why.substr(0, at) + "http://" + why.substr(at + 6));
    }
    address_ = "http://" + front_end_->address().substr(6);  // tcp://HOST:PORT
    server_ = std::make_unique<RequestProcessor>(front_end_->native_listening_socket());
    auto& srv = *server_;
    srv.set_payload_max_length(max_body);
    srv.set_write_timeout(
        std::chrono::duration_cast<std::chrono::seconds>(limits.write_timeout).count());
    srv.set_keep_alive_timeout(HttpFrontEnd::kKeepAliveSeconds);
    srv.set_keep_alive_max_count(HttpFrontEnd::kKeepAliveMax);

    srv.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status != 413 && !authorized(req, res)) return;
        if (res.status == 404)
            send_error(res, 404, "no such endpoint: " + req.method + " " + req.path, "not_found");
        else if (res.status == 413)
            send_error(res, 413,
                       // cpp-httplib caps a form-encoded body (curl -d's default type)
                       // at 8 KiB in its compiled part: JSON bodies reach our own cap.
                       "the request body is too large (send it as Content-Type: "
                       "application/json; other types are capped at 8 KiB)",
                       "too_large");
        else
            send_error(res, res.status, "request failed", "http_" + std::to_string(res.status));
    });

    // The voices as OpenAI's model objects: clients that list models first
    // (and offer them to choose from) find the voices there.
    srv.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        json data = json::array();
        for (const auto& v : context_.voices.voices())
            data.push_back(
                {{"id", v.name},
                 {"object", "model"},
                 {"created", created_},
                 {"owned_by", v.attribution_name.empty() ? "libetude" : v.attribution_name}});
        res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
    });

    srv.Get("/v1/audio/voices", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        json list = json::array();
        for (const auto& v : context_.voices.voices())
            list.push_back({{"id", v.name},
                            {"name", v.name},
                            {"languages", v.languages},
                            {"description", v.description},
                            {"sample_rate", static_cast<int>(v.options.sample_rate)}});
        res.set_content(
            json{{"voices", list}, {"formats", json::array({"mp3", "opus", "wav", "flac", "pcm"})}}
                .dump(),
            "application/json");
    });

    srv.Post("/v1/audio/speech", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authorized(req, res)) return;
        const auto& limits = context_.limits;
        if (json_nesting_exceeds(req.body, limits.frames.max_json_depth))
            return send_error(res, 400, "the body nests too deeply", "invalid_json");
        const json body = json::parse(req.body, nullptr, false);
        if (body.is_discarded() || !body.is_object())
            return send_error(res, 400, "the body must be a JSON object", "invalid_json");
        const auto string_field = [&](const char* key, std::string& out, bool& bad) {
            const auto it = body.find(key);
            if (it == body.end() || it->is_null()) return false;
            if (!it->is_string()) {
                bad = true;
                send_error(res, 400, std::string("\"") + key + "\" must be a string",
                           "invalid_" + std::string(key), key);
                return false;
            }
            out = it->get<std::string>();
            return true;
        };
        bool bad = false;
        // OpenAI's default format is mp3.
        std::string input, voice_name, format = "mp3", model;
        if (!string_field("input", input, bad)) {
            if (!bad)
                send_error(res, 400, "\"input\" (the text to speak) is required", "missing_input",
                           "input");
            return;
        }
        if (input.size() > limits.max_text_bytes)
            return send_error(res, 400,
                              "\"input\" is " + std::to_string(input.size()) +
                                  " bytes; the limit is " + std::to_string(limits.max_text_bytes),
                              "input_too_long", "input");
        if (!engine::has_speakable_text(input))
            return send_error(res, 400, "\"input\" has nothing to speak", "empty_input", "input");
        string_field("model", model, bad);  // any model name: there is one engine
        if (bad) return;
        const bool named = string_field("voice", voice_name, bad);
        if (bad) return;
        string_field("response_format", format, bad);
        if (bad) return;
        const VoiceEntry* voice =
            named ? context_.voices.by_name(voice_name) : &context_.voices.default_voice();
        // OpenAI's own voice names (clients such as pipecat's send no other):
        // the default voice, unless one of ours has that name.
        if (!voice && is_openai_voice(voice_name)) voice = &context_.voices.default_voice();
        if (!voice) {
            std::string names;
            for (const auto& v : context_.voices.voices())
                names += (names.empty() ? "" : ", ") + v.name;
            return send_error(res, 400,
                              "unknown voice '" + voice_name + "' (voices: " + names + ")",
                              "unknown_voice", "voice");
        }
        auto state = std::make_shared<std::function<bool(std::string_view)>>();
        auto encoder = std::shared_ptr<AudioEncoder>(
            make_audio_encoder(format, [state](std::string_view b) { return (*state)(b); }));
        if (!encoder)
            return send_error(res, 400,
                              "unsupported response_format '" + format + "' (choose " +
                                  audio_format_names() + ")",
                              "unsupported_response_format", "response_format");

        // An extension: the output rate. Otherwise pcm, mp3 and opus at OpenAI's
        // 24 kHz, wav and flac at the voice's own rate.
        std::optional<int> rate = default_audio_rate(format);
        if (const auto r = body.find("sample_rate"); r != body.end() && !r->is_null()) {
            if (!r->is_number() || r->get<double>() != std::floor(r->get<double>()) ||
                std::abs(r->get<double>()) > 1e6)
                return send_error(res, 400, "\"sample_rate\" must be a whole number of Hz",
                                  "invalid_sample_rate", "sample_rate");
            rate = static_cast<int>(r->get<double>());
        }
        const int out_rate = rate.value_or(static_cast<int>(voice->options.sample_rate));
        if (const auto why = audio_rate_problem(format, out_rate); !why.empty())
            return send_error(res, 400,
                              "cannot make " + format + " at " + std::to_string(out_rate) +
                                  " Hz: " + why + " (\"sample_rate\")",
                              "invalid_sample_rate", "sample_rate");

        // OpenAI's speed, 0.25 to 4.0, is the inverse of the voice's pace:
        // a Piper voice's length_scale (speed 1.25 speaks as `etude say
        // --length-scale 0.8` for a voice whose config says 1.0), a built-in
        // voice's duration stretch (the same option, from 1.0).
        std::optional<float> length_scale;
        if (const auto s = body.find("speed"); s != body.end() && !s->is_null()) {
            if (!s->is_number())
                return send_error(res, 400, "\"speed\" must be a number", "invalid_speed", "speed");
            const double speed = s->get<double>();
            if (!(speed >= 0.25 && speed <= 4.0))
                return send_error(res, 400, "\"speed\" must be 0.25 to 4.0", "invalid_speed",
                                  "speed");
            if (speed != 1.0)
                length_scale = static_cast<float>(static_cast<double>(voice->length_scale) / speed);
        }

        auto job = std::make_shared<SpeechJob>(context_, *voice);
        job->set_sample_rate(out_rate);
        if (length_scale) job->set_length_scale(*length_scale);
        job->add_text(input);
        job->finish();
        switch (job->take_turn()) {
            case SpeechJob::Outcome::Spoken:
                break;
            default:
                res.set_header("Retry-After", "1");
                return send_error(res, 503, "the server is busy; try again shortly", "busy");
        }
        const std::string who = peer(req);
        res.set_chunked_content_provider(
            encoder->content_type(),
            [this, job, encoder, state, who, out_rate](std::size_t, httplib::DataSink& sink) {
                *state = [&sink](std::string_view b) { return sink.write(b.data(), b.size()); };
                const auto r = job->run([&](int rate) { return encoder->start(rate); },
                                        [&](std::span<const float> s) {
                                            // Shutting down: end the reply rather than wait for it.
                                            return !stopping() && encoder->add(s);
                                        });
                const bool ok = r.outcome == SpeechJob::Outcome::Spoken && encoder->finish();
                *state = [](std::string_view) { return false; };
                const double audio_s = static_cast<double>(r.samples) / out_rate;
                char line[512];
                // gpu-chunks: a Piper voice's decoder chunks made on the GPU tier, of all.
                char chunks[64] = "";
                if (r.chunks > 0)
                    std::snprintf(chunks, sizeof chunks, " gpu-chunks=%llu/%llu",
                                  static_cast<unsigned long long>(r.gpu_chunks),
                                  static_cast<unsigned long long>(r.chunks));
                std::snprintf(line, sizeof line,
                              "http %s speech voice=%s chars=%zu first-audio=%.1fms rtf=%.3f "
                              "audio=%.2fs%s %s",
                              who.c_str(), job->voice().name.c_str(), job->characters(),
                              r.first_audio_ms, audio_s > 0 ? r.seconds / audio_s : 0.0, audio_s,
                              chunks, ok ? "spoken" : "cancelled");
                context_.log.write(line);
                if (!ok) return false;  // the client sees a cut stream, not a complete one
                sink.done();
                return true;
            });
    });
}

HttpServer::~HttpServer() = default;

// In each handler, not in cpp-httplib's pre-routing handler: that one runs
// before the body is read, and a body left unread on a kept-alive connection
// would be taken for the next request.
bool HttpServer::authorized(const httplib::Request& req, httplib::Response& res) const {
    if (api_key_.empty()) return true;
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view scheme = "Bearer ";
    if (auth.size() > scheme.size() && auth.compare(0, scheme.size(), scheme) == 0 &&
        same_key(std::string_view(auth).substr(scheme.size()), api_key_))
        return true;
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, 401,
               auth.empty() ? "no API key given: send Authorization: Bearer KEY"
                            : "incorrect API key provided",
               "invalid_api_key");
    return false;
}

void HttpServer::run(const std::atomic<bool>& stop) {
    stop_ = &stop;
    front_end_->run(stop);
}

}  // namespace etude::server
