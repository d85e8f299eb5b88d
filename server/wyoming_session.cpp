#include "server/wyoming_session.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "audio-io/wav_writer.h"
#include "server/speech_job.h"

namespace etude::server {

using nlohmann::json;

json wyoming_info(const VoiceCatalog& voices) {
    json list = json::array();
    for (const auto& v : voices.voices()) {
        json speakers = nullptr;
        if (!v.speakers.empty()) {
            speakers = json::array();
            for (const auto& s : v.speakers) speakers.push_back({{"name", s}});
        }
        list.push_back({{"name", v.name},
                        {"attribution", {{"name", v.attribution_name}, {"url", v.attribution_url}}},
                        {"installed", true},
                        {"description", v.description},
                        {"version", v.version},
                        {"languages", v.languages},
                        {"speakers", speakers}});
    }
    json program = {{"name", "etude"},
                    {"attribution", {{"name", "LibEtude"}, {"url", ""}}},  // no public address yet
                    {"installed", true},
                    {"description", "LibEtude: real-time streaming speech synthesis"},
                    {"version", "0.1.0"},
                    {"voices", list},
                    {"supports_synthesize_streaming", true}};
    return {{"asr", json::array()},    {"tts", json::array({program})}, {"handle", json::array()},
            {"intent", json::array()}, {"wake", json::array()},         {"mic", json::array()},
            {"snd", json::array()}};
}

namespace {

using Clock = std::chrono::steady_clock;

const char* outcome_name(SpeechJob::Outcome o) {
    switch (o) {
        case SpeechJob::Outcome::Spoken:
            return "spoken";
        case SpeechJob::Outcome::Cancelled:
            return "cancelled";
        case SpeechJob::Outcome::Busy:
            return "busy";
        case SpeechJob::Outcome::TimedOut:
            return "queue-timeout";
        case SpeechJob::Outcome::Failed:
            return "failed";
    }
    return "?";
}

class Session {
  public:
    Session(Connection connection, const ServerContext& context, const std::atomic<bool>& stop)
        : conn_(std::move(connection)),
          ctx_(context),
          stop_(stop),
          reader_(context.limits.frames) {}

    void run();

  private:
    // A synthesis in progress on this connection.
    struct Active {
        std::unique_ptr<SpeechJob> job;
        std::thread thread;
        bool streaming = false;
        bool stopped = false;        // synthesize-stop seen
        std::size_t text_bytes = 0;  // streamed so far, against --max-text
        std::atomic<bool> done{false};
        std::atomic<bool> over_limit{false};  // stopped for text past --max-text
    };

    bool send(const std::string& type, json data = json::object(), std::string payload = {});
    void send_error(const std::string& text, const std::string& code) {
        send("error", {{"text", text}, {"code", code}});
    }
    // false: close the connection.
    bool handle(const WyomingEvent& ev);
    // The voice (and the speaker, "" for the default) a request asks for.
    const VoiceEntry* choose_voice(const json& data, std::string& speaker,
                                   std::string& error) const;
    void start_job(const VoiceEntry& voice, const std::string& speaker, bool streaming);
    void synthesis_thread(Active& active);
    void reap(bool cancel);

    Connection conn_;
    const ServerContext& ctx_;
    const std::atomic<bool>& stop_;
    WyomingFrameReader reader_;
    std::mutex write_mu_;
    std::atomic<bool> dead_{false};
    std::unique_ptr<Active> active_;
};

bool Session::send(const std::string& type, json data, std::string payload) {
    const std::string bytes = encode_wyoming_event({type, std::move(data), std::move(payload)});
    std::lock_guard lock(write_mu_);
    if (dead_) return false;
    if (!conn_.write_all(bytes, ctx_.limits.write_timeout)) {
        // Gone, or not reading: either way nothing more reaches it.
        dead_ = true;
        conn_.shut_down();
        return false;
    }
    return true;
}

const VoiceEntry* Session::choose_voice(const json& data, std::string& speaker_out,
                                        std::string& error) const {
    speaker_out.clear();
    const auto it = data.find("voice");
    if (it == data.end() || it->is_null()) return &ctx_.voices.default_voice();
    if (!it->is_object()) {
        error = "\"voice\" must be an object with \"name\", \"language\" or \"speaker\"";
        return nullptr;
    }
    const auto field = [&](const char* key) -> std::optional<std::string> {
        const auto f = it->find(key);
        if (f == it->end() || f->is_null()) return std::nullopt;
        if (!f->is_string()) return std::string{};
        return f->get<std::string>();
    };
    const VoiceEntry* voice = nullptr;
    if (auto name = field("name")) {
        voice = ctx_.voices.by_name(*name);
        if (!voice) {
            error = "unknown voice '" + *name + "' (describe lists the voices)";
            return nullptr;
        }
    } else if (auto language = field("language")) {
        voice = ctx_.voices.by_language(*language);
        if (!voice) {
            error = "no voice speaks '" + *language + "'";
            return nullptr;
        }
    } else {
        voice = &ctx_.voices.default_voice();
    }
    if (auto speaker = field("speaker"); speaker && !voice->speakers.empty()) {
        // By name, or by id as Piper's tools take it (wyoming-piper too).
        bool known = false;
        for (const auto& s : voice->speakers) known = known || s == *speaker;
        const bool numeric = !speaker->empty() && speaker->size() <= 9 &&
                             speaker->find_first_not_of("0123456789") == std::string::npos;
        known = known || (numeric && std::stoul(*speaker) < voice->speakers.size());
        if (!known) {
            error = "voice '" + voice->name + "' has no speaker '" + *speaker + "'";
            return nullptr;
        }
        speaker_out = *speaker;
    }
    return voice;
}

void Session::start_job(const VoiceEntry& voice, const std::string& speaker, bool streaming) {
    active_ = std::make_unique<Active>();
    active_->job = std::make_unique<SpeechJob>(ctx_, voice, speaker);
    active_->streaming = streaming;
    Active& a = *active_;
    a.thread = std::thread([this, &a] { synthesis_thread(a); });
}

void Session::synthesis_thread(Active& a) {
    int rate = 0;
    std::uint64_t sent = 0;
    std::vector<short> pcm;
    const auto timestamp_ms = [&] { return rate > 0 ? sent * 1000 / rate : 0; };
    const auto result = a.job->run(
        [&](int r) {
            rate = r;
            return send("audio-start",
                        {{"rate", r}, {"width", 2}, {"channels", 1}, {"timestamp", 0}});
        },
        [&](std::span<const float> samples) {
            pcm.resize(samples.size());
            audio_io::float_to_pcm16(samples, pcm);
            // 16-bit little-endian: the host order on every platform we build for.
            std::string payload(reinterpret_cast<const char*>(pcm.data()), pcm.size() * 2);
            const bool ok =
                send("audio-chunk",
                     {{"rate", rate}, {"width", 2}, {"channels", 1}, {"timestamp", timestamp_ms()}},
                     std::move(payload));
            sent += samples.size();
            return ok;
        });
    switch (result.outcome) {
        case SpeechJob::Outcome::Spoken:
            send("audio-stop", {{"timestamp", timestamp_ms()}});
            if (a.streaming) send("synthesize-stopped");
            break;
        case SpeechJob::Outcome::Busy:
            send_error(
                "the server is busy: every synthesis slot and waiting place is taken; "
                "try again shortly",
                "busy");
            break;
        case SpeechJob::Outcome::TimedOut:
            send_error("the server is busy: no synthesis slot came free in time", "busy");
            break;
        case SpeechJob::Outcome::Failed:
            send_error("synthesis failed: " + result.error, "synthesis-failed");
            break;
        case SpeechJob::Outcome::Cancelled:
            break;
    }
    // Home Assistant reads a stream until synthesize-stopped and passes over
    // error events: a stream that ends otherwise than with its client gone
    // still says it has stopped, so the client is not left waiting.
    const bool client_left = result.outcome == SpeechJob::Outcome::Cancelled && !a.over_limit;
    if (a.streaming && result.outcome != SpeechJob::Outcome::Spoken && !client_left)
        send("synthesize-stopped");
    const double audio_s = rate > 0 ? static_cast<double>(result.samples) / rate : 0.0;
    char line[512];
    std::snprintf(line, sizeof line,
                  "wyoming %s %s voice=%s chars=%zu first-audio=%.1fms rtf=%.3f audio=%.2fs %s",
                  conn_.peer().c_str(), a.streaming ? "stream" : "synthesize",
                  a.job->voice().name.c_str(), a.job->characters(), result.first_audio_ms,
                  audio_s > 0 ? result.seconds / audio_s : 0.0, audio_s,
                  outcome_name(result.outcome));
    ctx_.log.write(line);
    a.done = true;
}

// Joins a finished synthesis; with `cancel`, stops a running one first.
void Session::reap(bool cancel) {
    if (!active_) return;
    if (cancel) {
        active_->job->cancel();
    } else if (!active_->done) {
        return;
    }
    active_->thread.join();
    active_.reset();
}

bool Session::handle(const WyomingEvent& ev) {
    const auto text_of = [&](std::string& out) -> bool {
        const auto t = ev.data.find("text");
        if (t == ev.data.end() || !t->is_string()) {
            send_error("'" + ev.type + "' needs a \"text\" string", "bad-request");
            return false;
        }
        out = t->get<std::string>();
        return true;
    };
    if (ev.type == "describe") return send("info", wyoming_info(ctx_.voices));
    if (ev.type == "ping") {
        json data = json::object();
        if (const auto t = ev.data.find("text"); t != ev.data.end()) data["text"] = *t;
        return send("pong", data);
    }
    reap(false);  // a synthesis that has just ended no longer counts as running
    if (ev.type == "synthesize") {
        // Home Assistant follows its synthesize-chunks with the whole text
        // for servers that cannot stream; speaking it would say it twice.
        if (active_ && active_->streaming) return true;
        if (active_) {
            send_error("a synthesis is already running on this connection", "busy");
            return true;
        }
        std::string text, why;
        if (!text_of(text)) return true;
        if (text.size() > ctx_.limits.max_text_bytes) {
            send_error("text of " + std::to_string(text.size()) + " bytes is over the limit of " +
                           std::to_string(ctx_.limits.max_text_bytes),
                       "text-too-long");
            return true;
        }
        std::string speaker;
        const VoiceEntry* voice = choose_voice(ev.data, speaker, why);
        if (!voice) {
            send_error(why, "unknown-voice");
            return true;
        }
        start_job(*voice, speaker, false);
        active_->job->add_text(std::move(text));
        active_->job->finish();
        return true;
    }
    if (ev.type == "synthesize-start") {
        if (active_) {
            send_error("a synthesis is already running on this connection", "busy");
            return true;
        }
        std::string why;
        std::string speaker;
        const VoiceEntry* voice = choose_voice(ev.data, speaker, why);
        if (!voice) {
            send_error(why, "unknown-voice");
            return true;
        }
        start_job(*voice, speaker, true);
        return true;
    }
    if (ev.type == "synthesize-chunk" || ev.type == "synthesize-stop") {
        if (!active_ || !active_->streaming || active_->stopped) {
            send_error("'" + ev.type + "' without a synthesize-start before it", "no-stream");
            return true;
        }
        Active& a = *active_;
        if (ev.type == "synthesize-stop") {
            a.stopped = true;
            a.job->finish();  // the engine speaks the sentence it held back
            return true;
        }
        std::string text;
        if (!text_of(text)) return true;
        if (a.text_bytes + text.size() > ctx_.limits.max_text_bytes) {
            send_error("the streamed text is over the limit of " +
                           std::to_string(ctx_.limits.max_text_bytes) + " bytes; speech stopped",
                       "text-too-long");
            a.stopped = true;
            a.over_limit = true;
            a.job->cancel();
            return true;
        }
        // Pieces go to the engine as they come: it holds an unfinished
        // sentence until the text after it proves it complete.
        a.text_bytes += text.size();
        a.job->add_text(std::move(text));
        return true;
    }
    // Other events (audio, transcripts, ...) are not for a TTS server; the
    // Python servers ignore them too.
    return true;
}

void Session::run() {
    // Left uninitialised: a connection that sends a few bytes touches a
    // page of it, not 64 KiB (hundreds of idle connections are resident size).
    constexpr std::size_t kReadSize = 64 * 1024;
    const std::unique_ptr<char[]> buf(new char[kReadSize]);
    auto last_input = Clock::now();
    bool client_closed = false, broke_protocol = false;
    // A frame begun must arrive whole in time, however it trickles in: its
    // header line within --header-timeout, then the rest within
    // --body-timeout (the idle timeout restarts with every byte).
    enum class Part { None, Header, Rest } part = Part::None;
    auto part_deadline = Clock::now();
    while (!stop_ && !dead_) {
        if (part != Part::None && Clock::now() > part_deadline) {
            send_error(std::string("a frame's ") +
                           (part == Part::Header ? "header line did not arrive within "
                                                   "--header-timeout"
                                                 : "data did not arrive within --body-timeout"),
                       "frame-timeout");
            ctx_.log.write("wyoming " + conn_.peer() + " frame timeout");
            broke_protocol = true;
            break;
        }
        reap(false);
        std::size_t n = 0;
        const auto status =
            conn_.read_some(buf.get(), kReadSize, std::chrono::milliseconds(200), n);
        if (status == Connection::ReadStatus::Failed) break;
        if (status == Connection::ReadStatus::Closed) {
            client_closed = true;
            if (reader_.partial())
                ctx_.log.write("wyoming " + conn_.peer() + " closed inside a frame (truncated)");
            break;
        }
        if (status == Connection::ReadStatus::TimedOut) {
            // Waiting for audio is not idling; waiting for text is.
            const bool waiting_on_us = active_ && (!active_->streaming || active_->stopped);
            if (!waiting_on_us && Clock::now() - last_input > ctx_.limits.idle_timeout) {
                send_error("closing an idle connection", "idle");
                break;
            }
            continue;
        }
        last_input = Clock::now();
        reader_.feed(std::string_view(buf.get(), n));
        bool keep = true;
        while (keep) {
            auto r = reader_.next();
            if (r.error) {
                send_error("malformed frame: " + r.error->what, "bad-frame");
                ctx_.log.write("wyoming " + conn_.peer() + " malformed frame: " + r.error->what);
                keep = false;
                broke_protocol = true;
                break;
            }
            if (!r.event) break;
            try {
                keep = handle(*r.event);
            } catch (const std::exception& e) {
                send_error(std::string("bad event: ") + e.what(), "bad-request");
                keep = false;
                broke_protocol = true;
            }
        }
        if (!keep) break;
        const Part now_part = reader_.reading_header() ? Part::Header
                              : reader_.partial()      ? Part::Rest
                                                       : Part::None;
        if (now_part != part) {
            part = now_part;
            part_deadline = Clock::now() + (part == Part::Header ? ctx_.limits.header_timeout
                                                                 : ctx_.limits.body_timeout);
        }
    }
    // A client that sent its request and then closed its side may still be
    // reading (a half-close): let a request already complete finish, its
    // writes fail at once if the client is really gone. Anything else stops.
    const bool finish_request =
        client_closed && !stop_ && active_ && (!active_->streaming || active_->stopped);
    if (finish_request) {
        active_->thread.join();
        active_.reset();
    }
    reap(true);
    if (broke_protocol && !dead_) conn_.close_after_last_message(std::chrono::milliseconds(500));
    conn_.shut_down();
}

}  // namespace

void run_wyoming_session(Connection connection, const ServerContext& context,
                         const std::atomic<bool>& stop) {
    try {
        Session(std::move(connection), context, stop).run();
    } catch (const std::exception& e) {
        context.log.write(std::string("wyoming session ended by an error: ") + e.what());
    }
}

}  // namespace etude::server
