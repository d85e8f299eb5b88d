#include "server/http_server.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "engine/text_check.h"
#include "server/audio_encoding.h"
#include "server/speech_events.h"
#include "server/speech_job.h"
#include "server/wyoming_frame.h"

namespace etude::server {

using nlohmann::json;

namespace {

void send_error(HttpReply& res, int status, const std::string& message, const std::string& code,
                const std::string& param = {}) {
    res.status = status;
    res.set_content(error_body(status, message, code, param), "application/json");
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
            endpoint, context_, max_body, workers,
            [this](int fd, HttpRequest request, bool last) { return answer(fd, request, last); });
    } catch (const Error& e) {
        const std::string why = e.what();  // "cannot listen on tcp://...": say http://
        const auto at = why.find("tcp://");
        throw Error(at == std::string::npos ? why
                                            : why.substr(0, at) + "http://" + why.substr(at + 6));
    }
    address_ = "http://" + front_end_->address().substr(6);  // tcp://HOST:PORT
}

HttpServer::~HttpServer() = default;

bool HttpServer::answer(int fd, const HttpRequest& req, bool last) const {
    HttpReply res;
    route(req, res);
    return write_reply(fd, res, req.minor_version, req.method == "HEAD",
                       last || req.wants_close() || stopping(), context_.limits.write_timeout);
}

void HttpServer::route(const HttpRequest& req, HttpReply& res) const {
    const bool get = req.method == "GET" || req.method == "HEAD";
    const char* allowed = "GET, HEAD";
    if (req.path == "/v1/models") {
        if (get) return list_models(req, res);
    } else if (req.path.starts_with("/v1/models/")) {
        if (get) return retrieve_model(req, res);
    } else if (req.path == "/v1/audio/voices") {
        if (get) return list_voices(req, res);
    } else if (req.path == "/v1/audio/speech") {
        if (req.method == "POST") return speak(req, res);
        allowed = "POST";
    } else {
        if (!authorized(req, res)) return;
        return send_error(res, 404, "no such endpoint: " + req.method + " " + req.path,
                          "not_found");
    }
    if (!authorized(req, res)) return;
    res.set_header("Allow", allowed);
    send_error(res, 405, req.method + " is not allowed on " + req.path + " (" + allowed + ")",
               "method_not_allowed");
}

// The voices as OpenAI's model objects: clients that list models first
// (and offer them to choose from) find the voices there, and a request
// whose "model" is one of them is spoken by it (speak()).
nlohmann::json HttpServer::model_object(const VoiceEntry& v) const {
    return {{"id", v.name},
            {"object", "model"},
            {"created", created_},
            {"owned_by", v.attribution_name.empty() ? "libetude" : v.attribution_name}};
}

void HttpServer::list_models(const HttpRequest& req, HttpReply& res) const {
    if (!authorized(req, res)) return;
    json data = json::array();
    for (const auto& v : context_.voices.voices()) data.push_back(model_object(v));
    res.set_content(json{{"object", "list"}, {"data", data}}.dump(), "application/json");
}

// GET /v1/models/{id}: one of them, as OpenAI's "retrieve model".
void HttpServer::retrieve_model(const HttpRequest& req, HttpReply& res) const {
    if (!authorized(req, res)) return;
    const std::string id = req.path.substr(std::string_view("/v1/models/").size());
    const VoiceEntry* voice = context_.voices.by_name(id);
    if (!voice)
        return send_error(res, 404,
                          "the model '" + id + "' does not exist (GET /v1/models lists them)",
                          "model_not_found", "model");
    res.set_content(model_object(*voice).dump(), "application/json");
}

void HttpServer::list_voices(const HttpRequest& req, HttpReply& res) const {
    if (!authorized(req, res)) return;
    json list = json::array();
    for (const auto& v : context_.voices.voices())
        list.push_back({{"id", v.name},
                        {"name", v.name},
                        {"languages", v.languages},
                        {"description", v.description},
                        {"sample_rate", static_cast<int>(v.options.sample_rate)}});
    res.set_content(json{{"voices", list}, {"formats", audio_formats()}}.dump(),
                    "application/json");
}

void HttpServer::speak(const HttpRequest& req, HttpReply& res) const {
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
                          "\"input\" is " + std::to_string(input.size()) + " bytes; the limit is " +
                              std::to_string(limits.max_text_bytes),
                          "input_too_long", "input");
    if (!engine::has_speakable_text(input))
        return send_error(res, 400, "\"input\" has nothing to speak", "empty_input", "input");
    // Any model name: there is one engine. One of the voices (as
    // GET /v1/models lists them) speaks where "voice" names none of ours.
    string_field("model", model, bad);
    if (bad) return;
    // OpenAI's "instructions" (how to speak) is for its own models: taken,
    // and checked, but a voice here has no such control.
    std::string instructions;
    string_field("instructions", instructions, bad);
    if (bad) return;
    // A voice is a name, or (OpenAI's custom voices) an object naming it by
    // its "id".
    bool named = false;
    if (const auto v = body.find("voice"); v != body.end() && v->is_object()) {
        const auto id = v->find("id");
        if (id == v->end() || !id->is_string())
            return send_error(res, 400, "a \"voice\" object must have a string \"id\"",
                              "invalid_voice", "voice");
        voice_name = id->get<std::string>();
        named = true;
    } else {
        named = string_field("voice", voice_name, bad);
        if (bad) return;
    }
    string_field("response_format", format, bad);
    if (bad) return;
    // "audio" (the default): the encoded bytes as the body; "sse": the same
    // bytes in OpenAI's speech events (speech_events.h).
    std::string stream_format = "audio";
    string_field("stream_format", stream_format, bad);
    if (bad) return;
    if (stream_format != "audio" && stream_format != "sse")
        return send_error(res, 400,
                          "unsupported stream_format '" + stream_format + "' (choose audio, sse)",
                          "unsupported_stream_format", "stream_format");
    const bool sse = stream_format == "sse";
    const VoiceEntry* voice = named ? context_.voices.by_name(voice_name) : nullptr;
    // No voice of ours named, or OpenAI's own voice names (clients such as
    // pipecat's send no other): the voice "model" names, else the default
    // voice.
    if (!voice && (!named || is_openai_voice(voice_name))) {
        voice = model.empty() ? nullptr : context_.voices.by_name(model);
        if (!voice) voice = &context_.voices.default_voice();
    }
    if (!voice) {
        std::string names;
        for (const auto& v : context_.voices.voices())
            names += (names.empty() ? "" : ", ") + v.name;
        return send_error(res, 400, "unknown voice '" + voice_name + "' (voices: " + names + ")",
                          "unknown_voice", "voice");
    }
    auto state = std::make_shared<std::function<bool(std::string_view)>>();
    auto encoder = std::shared_ptr<AudioEncoder>(
        make_audio_encoder(format, [state](std::string_view b) { return (*state)(b); }));
    if (!encoder)
        return send_error(
            res, 400,
            "unsupported response_format '" + format + "' (choose " + audio_format_names() + ")",
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
            return send_error(res, 400, "\"speed\" must be 0.25 to 4.0", "invalid_speed", "speed");
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
    const std::string who = req.peer;
    res.content_type = sse ? "text/event-stream" : encoder->content_type();
    res.stream = [this, job, encoder, state, who, out_rate, sse](const HttpReply::Write& write) {
        *state = [&write, sse](std::string_view b) {
            return sse ? b.empty() || write(speech_audio_delta_event(b)) : write(b);
        };
        const auto r = job->run([&](int rate) { return encoder->start(rate); },
                                [&](std::span<const float> s) {
                                    // Shutting down: end the reply rather than wait for it.
                                    return !stopping() && encoder->add(s);
                                });
        const bool ok = r.outcome == SpeechJob::Outcome::Spoken && encoder->finish() &&
                        (!sse || write(speech_audio_done_event()));
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
                      who.c_str(), job->voice().name.c_str(), job->characters(), r.first_audio_ms,
                      audio_s > 0 ? r.seconds / audio_s : 0.0, audio_s, chunks,
                      ok ? "spoken" : "cancelled");
        context_.log.write(line);
        return ok;  // not ok: the client sees a cut stream, not a complete one
    };
}

bool HttpServer::authorized(const HttpRequest& req, HttpReply& res) const {
    if (api_key_.empty()) return true;
    const std::string* header = req.header("Authorization");
    const std::string auth = header ? *header : std::string();
    // The scheme's name is case-insensitive (RFC 9110, 11.1).
    constexpr std::string_view scheme = "bearer ";
    const auto scheme_matches = [&] {
        for (std::size_t i = 0; i < scheme.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(auth[i])) != scheme[i]) return false;
        return true;
    };
    if (auth.size() > scheme.size() && scheme_matches() &&
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
