#include "server/http_server.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "engine/text_input.h"
#include "server/audio_encoding.h"
#include "server/speech_job.h"
#include "server/wyoming_frame.h"

namespace etude::server {

using nlohmann::json;

namespace {

// OpenAI's error shape: {"error": {"message", "type", "code"}}.
void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& code) {
    res.status = status;
    res.set_content(json{{"error",
                          {{"message", message},
                           {"type", status == 503 ? "server_busy" : "invalid_request_error"},
                           {"code", code}}}}
                        .dump(),
                    "application/json");
}

std::string peer(const httplib::Request& req) {
    return req.remote_addr + ":" + std::to_string(req.remote_port);
}

}  // namespace

HttpServer::HttpServer(const ServerContext& context, const std::string& host_port)
    : context_(context), server_(std::make_unique<httplib::Server>()) {
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

    srv.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
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

    srv.Get("/v1/audio/voices", [this](const httplib::Request&, httplib::Response& res) {
        json list = json::array();
        for (const auto& v : context_.voices.voices())
            list.push_back({{"id", v.name},
                            {"name", v.name},
                            {"languages", v.languages},
                            {"description", v.description},
                            {"sample_rate", static_cast<int>(v.options.sample_rate)}});
        res.set_content(
            json{{"voices", list}, {"formats", json::array({"wav", "pcm", "flac"})}}.dump(),
            "application/json");
    });

    srv.Post("/v1/audio/speech", [this](const httplib::Request& req, httplib::Response& res) {
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
                           "invalid_" + std::string(key));
                return false;
            }
            out = it->get<std::string>();
            return true;
        };
        bool bad = false;
        std::string input, voice_name, format = "wav", model;
        if (!string_field("input", input, bad)) {
            if (!bad)
                send_error(res, 400, "\"input\" (the text to speak) is required", "missing_input");
            return;
        }
        if (input.size() > limits.max_text_bytes)
            return send_error(res, 400,
                              "\"input\" is " + std::to_string(input.size()) +
                                  " bytes; the limit is " + std::to_string(limits.max_text_bytes),
                              "input_too_long");
        if (!engine::has_speakable_text(input))
            return send_error(res, 400, "\"input\" has nothing to speak", "empty_input");
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
                              "unknown_voice");
        }
        if (const auto s = body.find("speed"); s != body.end() && !s->is_null()) {
            if (!s->is_number())
                return send_error(res, 400, "\"speed\" must be a number", "invalid_speed");
            if (std::abs(s->get<double>() - 1.0) > 1e-9)
                return send_error(res, 400, "only \"speed\": 1.0 is supported",
                                  "unsupported_speed");
        }
        auto state = std::make_shared<std::function<bool(std::string_view)>>();
        auto encoder = std::shared_ptr<AudioEncoder>(
            make_audio_encoder(format, [state](std::string_view b) { return (*state)(b); }));
        if (!encoder)
            return send_error(
                res, 400,
                "unknown response_format '" + format + "' (choose " + audio_format_names() + ")",
                "unsupported_response_format");

        auto job = std::make_shared<SpeechJob>(context_, *voice);
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
            [this, job, encoder, state, who](std::size_t, httplib::DataSink& sink) {
                *state = [&sink](std::string_view b) { return sink.write(b.data(), b.size()); };
                const auto r = job->run([&](int rate) { return encoder->start(rate); },
                                        [&](std::span<const float> s) {
                                            // Shutting down: end the reply rather than wait for it.
                                            return !stopping_ && encoder->add(s);
                                        });
                const bool ok = r.outcome == SpeechJob::Outcome::Spoken && encoder->finish();
                *state = [](std::string_view) { return false; };
                const double rate = job->voice().options.sample_rate;
                const double audio_s = static_cast<double>(r.samples) / rate;
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
