#include "server/http_server.h"

#include <httplib.h>

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

#include "engine/text_input.h"
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

std::string peer(const httplib::Request& req) {
    return req.remote_addr + ":" + std::to_string(req.remote_port);
}

}  // namespace

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
      server_(std::make_unique<httplib::Server>()),
      api_key_(std::move(api_key)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
    const auto colon = host_port.rfind(':');
    if (colon == std::string::npos || colon + 1 == host_port.size() ||
        host_port.find_first_not_of("0123456789", colon + 1) != std::string::npos)
        throw Error("'" + host_port + "' is not HOST:PORT");
    std::string host = host_port.substr(0, colon);
    if (host.empty()) host = "0.0.0.0";
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    const int port = std::stoi(host_port.substr(colon + 1));
    if (port > 65535) throw Error("port " + std::to_string(port) + " is out of range");

    auto& srv = *server_;
    const auto& limits = context_.limits;
    // One worker per request that may run or wait; more connections queue in
    // the library until one frees (our slots answer 503 past that).
    const std::size_t workers = limits.max_syntheses + limits.max_waiting + 4;
    srv.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    srv.set_payload_max_length(limits.max_text_bytes * 2 + 4096);
    srv.set_read_timeout(
        std::chrono::duration_cast<std::chrono::seconds>(limits.idle_timeout).count());
    srv.set_write_timeout(
        std::chrono::duration_cast<std::chrono::seconds>(limits.write_timeout).count());
    srv.set_keep_alive_timeout(5);

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
                                            return !stopping_ && encoder->add(s);
                                        });
                const bool ok = r.outcome == SpeechJob::Outcome::Spoken && encoder->finish();
                *state = [](std::string_view) { return false; };
                const double audio_s = static_cast<double>(r.samples) / out_rate;
                char line[512];
                std::snprintf(line, sizeof line,
                              "http %s speech voice=%s chars=%zu first-audio=%.1fms rtf=%.3f "
                              "audio=%.2fs %s",
                              who.c_str(), job->voice().name.c_str(), job->characters(),
                              r.first_audio_ms, audio_s > 0 ? r.seconds / audio_s : 0.0, audio_s,
                              ok ? "spoken" : "cancelled");
                context_.log.write(line);
                if (!ok) return false;  // the client sees a cut stream, not a complete one
                sink.done();
                return true;
            });
    });

    errno = 0;  // the library says only that binding failed; the reason is left in errno
    const int bound =
        port == 0 ? srv.bind_to_any_port(host) : (srv.bind_to_port(host, port) ? port : -1);
    if (bound < 0)
        throw Error("cannot listen on http://" + host_port +
                    (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()));
    address_ = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
               std::to_string(bound);
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
    std::thread watcher([&] {
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stopping_ = true;
        server_->stop();
    });
    server_->listen_after_bind();
    watcher.join();
}

}  // namespace etude::server
