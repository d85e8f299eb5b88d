#include "server/wyoming_session.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "server/markdown_asterisks.h"
#include "server/speech_job.h"
#include "server/wyoming_session_active.h"

namespace etude::server {

using nlohmann::json;

json wyoming_info(const VoiceCatalog& voices, bool streaming) {
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
                    {"supports_synthesize_streaming", streaming}};
    return {{"asr", json::array()},    {"tts", json::array({program})}, {"handle", json::array()},
            {"intent", json::array()}, {"wake", json::array()},         {"mic", json::array()},
            {"snd", json::array()}};
}

WyomingSession::WyomingSession(int in_fd, int out_fd, bool is_socket, std::string peer,
                               std::optional<ConnectionLimiter::Ticket> ticket,
                               const ServerContext& context, SynthesisQueue& queue,
                               std::uint64_t serial, EventLoop& loop)
    : in_fd_(in_fd),
      out_fd_(out_fd),
      is_socket_(is_socket),
      peer_(std::move(peer)),
      ticket_(std::move(ticket)),
      ctx_(context),
      queue_(queue),
      serial_(serial),
      loop_(loop),
      outbox_(out_fd, is_socket, context.limits.write_timeout,
              [this](EventLoop::Interest interest) { loop_.change(in_fd_, interest); }),
      reader_(context.limits.frames) {}

WyomingSession::~WyomingSession() {
    if (is_socket_) ::close(in_fd_);
}

bool WyomingSession::send(const std::string& type, json data, std::string payload) {
    return outbox_.send(encode_wyoming_event({type, std::move(data), std::move(payload)}));
}

const VoiceEntry* WyomingSession::choose_voice(const json& data, std::string& speaker_out,
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
        // A speaker by its id may come as a number (wyoming-piper takes int()).
        if (f->is_number_unsigned()) return std::to_string(f->get<std::uint64_t>());
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
            // wyoming-piper speaks every request with its voice, whatever
            // the language: so does this server where it has none of it.
            voice = &ctx_.voices.default_voice();
            ctx_.log.write("wyoming " + peer_ + " no voice speaks '" + language->substr(0, 80) +
                           "': spoken with the default voice, " + voice->name);
        }
    } else {
        voice = &ctx_.voices.default_voice();
    }
    // (A client's words go into the log cut to 80 bytes: a frame may hold
    // a megabyte, and the connection now goes on.)
    if (auto speaker = field("speaker"); speaker && !voice->speakers.empty()) {
        // By name, or by id as Piper's tools take it (wyoming-piper too).
        if (voice->has_speaker(*speaker))
            speaker_out = *speaker;
        else  // wyoming-piper logs a warning and speaks with the default speaker
            ctx_.log.write("wyoming " + peer_ + " voice '" + voice->name + "' has no speaker '" +
                           speaker->substr(0, 80) + "': spoken by its default speaker");
    }
    return voice;
}

bool WyomingSession::handle(const WyomingEvent& ev) {
    const auto text_of = [&](std::string& out) -> bool {
        const auto t = ev.data.find("text");
        if (t == ev.data.end() || !t->is_string()) {
            send_error("'" + ev.type + "' needs a \"text\" string", "bad-request");
            return false;
        }
        out = t->get<std::string>();
        return true;
    };
    if (ev.type == "describe" || ev.type == "ping") {
        // Answered in the order they came: after the audio of a request
        // being spoken. (A stream still open waits for the client's text,
        // which comes after these: they go at once.)
        reap(false);
        if (active_ && (!active_->streaming || active_->stopped)) return hold(ev);
    }
    if (ev.type == "describe")
        return send("info", wyoming_info(ctx_.voices, ctx_.wyoming.streaming));
    if (ev.type == "ping") {
        json data = json::object();
        if (const auto t = ev.data.find("text"); t != ev.data.end()) data["text"] = *t;
        return send("pong", data);
    }
    reap(false);  // a synthesis that has just ended no longer counts as running
    if (failed_request_) return refuse_request();  // (its wake not yet taken)
    if (ev.type == "synthesize") {
        // Home Assistant follows its synthesize-chunks with the whole text
        // for servers that cannot stream; speaking it would say it twice.
        if (active_ && active_->streaming && !active_->stopped) return true;
        if (active_) return hold(ev);
        std::string text, why;
        if (!text_of(text)) return refuse_request();
        if (text.size() > ctx_.limits.max_text_bytes) {
            send_error("text of " + std::to_string(text.size()) + " bytes is over the limit of " +
                           std::to_string(ctx_.limits.max_text_bytes),
                       "text-too-long");
            return refuse_request();
        }
        std::string speaker;
        const VoiceEntry* voice = choose_voice(ev.data, speaker, why);
        if (!voice) {
            send_error(why, "unknown-voice");
            return refuse_request();
        }
        if (!start_job(*voice, speaker, false)) return refuse_request();
        text = ctx_.end_punctuation.completed(MarkdownAsterisks::removed(text));
        active_->job->add_text(std::move(text));
        active_->job->finish();
        poke();
        return true;
    }
    // --no-streaming: a stream's events are ignored, as wyoming-piper's
    // are, and its client sends the whole text in a synthesize.
    if (!ctx_.wyoming.streaming && ev.type.starts_with("synthesize-")) return true;
    if (ev.type == "synthesize-start") {
        if (active_ && active_->streaming && !active_->stopped) {
            send_error("a stream is already open on this connection", "busy");
            return true;
        }
        if (active_) return hold(ev);
        std::string why;
        std::string speaker;
        const VoiceEntry* voice = choose_voice(ev.data, speaker, why);
        if (!voice) {
            send_error(why, "unknown-voice");
            return refuse_request();
        }
        if (!start_job(*voice, speaker, true)) return refuse_request();
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
            if (auto rest = a.text_end.pass(a.asterisks.finish()); !rest.empty())
                a.job->add_text(std::move(rest));
            if (auto mark = a.text_end.finish(); !mark.empty()) a.job->add_text(std::move(mark));
            a.job->finish();  // the engine speaks the sentence it held back
            poke();
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
            poke();
            return true;
        }
        // Pieces go to the engine as they come: it holds an unfinished
        // sentence until the text after it proves it complete.
        a.text_bytes += text.size();
        // Trailing white space may wait for the next piece (end_punctuation.h).
        // Markdown's asterisks go first (markdown_asterisks.h).
        if (auto now = a.text_end.pass(a.asterisks.pass(text)); !now.empty())
            a.job->add_text(std::move(now));
        return true;
    }
    // Other events (audio, transcripts, ...) are not for a TTS server; the
    // Python servers ignore them too.
    return true;
}

bool WyomingSession::take_input(std::string_view bytes) {
    if (!bytes.empty()) {
        last_input_ = Clock::now();
        reader_.feed(bytes);
    }
    for (;;) {
        // Replies owed past kPauseReading: the events already read wait
        // (resume_reading() takes them up). One read of 64 KiB can hold
        // thousands of describes, over a megabyte of replies: handled at
        // once, they passed the outbox's kMostQueued, and a client that
        // reads nothing was cut off as gone, not at --write-timeout.
        if (outbox_.pending() > kPauseReading || held_) break;
        auto r = reader_.next();
        if (r.error) {
            send_error("malformed frame: " + r.error->what, "bad-frame");
            ctx_.log.write("wyoming " + peer_ + " malformed frame: " + r.error->what);
            linger();
            return false;
        }
        if (!r.event) break;
        if (!take_event(*r.event)) return false;
    }
    update_frame_deadline();
    return true;
}

bool WyomingSession::take_event(const WyomingEvent& ev) {
    try {
        return handle(ev);
    } catch (const std::exception& e) {
        send_error(std::string("bad event: ") + e.what(), "bad-request");
        ctx_.log.write("wyoming " + peer_ + " bad event: " + e.what());
        linger();
        return false;
    }
}

void WyomingSession::update_frame_deadline() {
    const Part now_part = reader_.reading_header() ? Part::Header
                          : reader_.partial()      ? Part::Rest
                                                   : Part::None;
    if (now_part == part_) return;
    part_ = now_part;
    part_deadline_ = Clock::now() + (part_ == Part::Header ? ctx_.limits.header_timeout
                                                           : ctx_.limits.body_timeout);
}

void WyomingSession::on_readable(char* buffer, std::size_t size) {
    if (stage_ == Stage::Closed) return;
    if (stage_ == Stage::Draining) {
        // Not read while draining: reported all the same, the socket has
        // hung up or failed, and the client is wholly gone.
        close();
        return;
    }
    ssize_t got;
    do got = is_socket_ ? ::recv(in_fd_, buffer, size, MSG_DONTWAIT) : ::read(in_fd_, buffer, size);
    while (got < 0 && errno == EINTR);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (stage_ == Stage::Lingering) {
        if (got <= 0) close();  // the client has read our last words and closed
        return;
    }
    if (got < 0) {
        if (job_running())
            ctx_.log.write("wyoming " + peer_ + " connection failed during its synthesis (" +
                           std::strerror(errno) + "): speech cancelled");
        close();
        return;
    }
    if (got == 0) {
        on_input_closed();
        return;
    }
    take_and_settle(std::string_view(buffer, static_cast<std::size_t>(got)));
}

void WyomingSession::take_and_settle(std::string_view bytes) {
    if (!take_input(bytes)) {
        if (stage_ != Stage::Open) return;
        if (outbox_.dead())
            ctx_.log.write("wyoming " + peer_ + " is gone or takes nothing it is sent: closed");
        close();
        return;
    }
    if (stage_ == Stage::Open && !paused_ && (held_ || outbox_.pending() > kPauseReading)) {
        paused_ = true;
        outbox_.set_reading(false);
    }
}

void WyomingSession::resume_reading() {
    if (paused_ && !held_ && stage_ == Stage::Open && outbox_.empty()) {
        paused_ = false;
        outbox_.set_reading(true);
        // A frame's clock starts again: while paused, its rest was not read.
        part_ = Part::None;
        take_and_settle({});  // the events read before the pause
    }
}

void WyomingSession::on_input_closed() {
    // A client that sent its request and then closed its side may still be
    // reading (a half-close): a request already complete is spoken, and
    // what was sent before is delivered; its writes fail at once if the
    // client is really gone. A stream still waiting for text stops.
    const bool request_complete = job_running() && (!active_->streaming || active_->stopped);
    if (reader_.partial())
        ctx_.log.write("wyoming " + peer_ + " closed inside a frame (truncated)");
    else if (job_running() && !request_complete)
        ctx_.log.write("wyoming " + peer_ +
                       " closed the connection during its stream: speech cancelled");
    if (!request_complete) reap(true);
    if (!job_running() && !held_ && outbox_.empty()) {
        close();
        return;
    }
    stage_ = Stage::Draining;
    // Standard input at its end is reported readable for ever (a pipe's
    // hang-up, a file): it is no longer watched. A socket's outbox still
    // needs to hear that the socket drains.
    if (is_socket_)
        outbox_.set_reading(false);
    else
        loop_.forget(in_fd_);
}

void WyomingSession::on_writable() {
    outbox_.on_writable();
    if (outbox_.dead() && stage_ != Stage::Closed) {
        close();
        return;
    }
    if (stage_ == Stage::Lingering && !shut_write_ && outbox_.empty()) {
        ::shutdown(out_fd_, SHUT_WR);
        shut_write_ = true;
    }
    // Room again: the speech that waited for it goes on.
    on_ready();
    if (stage_ == Stage::Draining && !job_running() && outbox_.empty()) close();
    resume_reading();
}

void WyomingSession::on_tick(Clock::time_point now) {
    if (stage_ == Stage::Closed) return;
    if (outbox_.check_stall(now)) {
        ctx_.log.write("wyoming " + peer_ + " took nothing of what was sent for --write-timeout" +
                       (job_running() ? ": its speech is cancelled" : ""));
        close();
        return;
    }
    if (stage_ == Stage::Lingering) {
        if (!shut_write_ && outbox_.empty()) {
            ::shutdown(out_fd_, SHUT_WR);
            shut_write_ = true;
        }
        if (now >= linger_until_) close();
        return;
    }
    if (stage_ == Stage::Draining) {
        if (!job_running() && outbox_.empty()) close();
        return;
    }
    resume_reading();
    if (!paused_ && part_ != Part::None && now > part_deadline_) {
        send_error(std::string("a frame's ") + (part_ == Part::Header
                                                    ? "header line did not arrive within "
                                                      "--header-timeout"
                                                    : "data did not arrive within --body-timeout"),
                   "frame-timeout");
        ctx_.log.write("wyoming " + peer_ + " frame timeout");
        linger();
        return;
    }
    // Waiting for audio is not idling, and neither is an open stream's wait
    // for its text: a language model's reply may pause for a minute (a
    // tool's call), and wyoming-piper waits for it. The stream holds a
    // synthesis slot meanwhile, as it would with text trickling in.
    if (!active_ && now - last_input_ > ctx_.limits.idle_timeout) {
        send_error("closing an idle connection", "idle");
        close();
    }
}

void WyomingSession::on_wake() {
    if (!active_ || !active_->done) return;
    reap(false);
    if (failed_request_ && stage_ == Stage::Open) {
        refuse_request();
        return;
    }
    if (held_ && (stage_ == Stage::Open || stage_ == Stage::Draining)) {
        // The request that waited for this one, then the events read after it.
        const WyomingEvent ev = std::move(*held_);
        held_.reset();
        if (!take_event(ev) || !take_input({})) {
            if (stage_ == Stage::Open || stage_ == Stage::Draining) close();
            return;
        }
        resume_reading();
    }
    if (stage_ == Stage::Draining && !job_running() && outbox_.empty()) close();
}

bool WyomingSession::hold(const WyomingEvent& ev) {
    // A request while the last one is still being spoken waits for it, and
    // so does every event after it: the Python servers take one event after
    // another. (A client that sends its next request as soon as it has read
    // audio-stop may come before the loop has reaped the synthesis that
    // sent it.) Reading pauses meanwhile (take_and_settle).
    held_ = ev;
    return true;
}

bool WyomingSession::refuse_request() {
    reap(false);
    // Standard input and output stay: they are the one session of the
    // process, and closing them would lose the error event unwritten.
    if (!is_socket_) {
        failed_request_ = false;
        return true;
    }
    failed_request_ = true;
    linger();
    return false;
}

void WyomingSession::stop() {
    close();
}

bool WyomingSession::over() const {
    return stage_ == Stage::Closed && !active_;
}

void WyomingSession::linger() {
    reap(true);
    if (outbox_.dead() || !is_socket_) {
        close();
        return;
    }
    stage_ = Stage::Lingering;
    paused_ = false;
    outbox_.set_reading(true);  // what the client still sends is dropped
    linger_until_ = Clock::now() + std::chrono::milliseconds(500);
    if (outbox_.empty()) {
        ::shutdown(out_fd_, SHUT_WR);
        shut_write_ = true;
    }
}

void WyomingSession::close() {
    if (stage_ == Stage::Closed) return;
    stage_ = Stage::Closed;
    reap(true);
    outbox_.kill();
    loop_.forget(in_fd_);
    // The socket stays open (its number not reused) until the session is
    // destroyed, after its synthesis has ended: the synthesis may still
    // touch it. Shut down, it takes nothing more.
    if (is_socket_) ::shutdown(in_fd_, SHUT_RDWR);
}

}  // namespace etude::server
