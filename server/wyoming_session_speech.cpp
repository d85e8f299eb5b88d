// WyomingSession's speech: a request's synthesis from its turn to its
// report, on the loop thread. Its stream's listener puts the session on
// the ready list (synthesis_queue.h); on_ready() then reads what is made,
// as far as the client's outbox has room, and sends it in chunks.
#include <algorithm>
#include <cstdio>

#include "audio-io/wav_writer.h"
#include "server/wyoming_session.h"
#include "server/wyoming_session_active.h"

namespace etude::server {

using nlohmann::json;

namespace {

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

// Audio waits in a connection's outbox up to this much before the
// synthesis waits for the client to take some: the socket's own buffer
// plus this is how far speech runs ahead of a slow reader.
constexpr std::size_t kAudioRoom = 64 * 1024;

}  // namespace

bool WyomingSession::start_job(const VoiceEntry& voice, const std::string& speaker,
                               bool streaming) {
    active_ = std::make_unique<Active>(ctx_.end_punctuation);
    Active& a = *active_;
    a.job = std::make_unique<SpeechJob>(ctx_, voice, speaker);
    a.streaming = streaming;
    a.ring = queue_.listener(key(), a.pending);
    switch (queue_.admit(key())) {
        case SynthesisQueue::Admit::Now:
            a.job->adopt_turn();
            open_job(a);
            return true;
        case SynthesisQueue::Admit::Waiting:
            a.queued = true;
            return true;
        case SynthesisQueue::Admit::Busy:
            break;
    }
    report(a, {.outcome = SpeechJob::Outcome::Busy});
    a.done = true;
    return false;
}

void WyomingSession::open_job(Active& a) {
    if (std::string error = a.job->open(a.ring); !error.empty()) {
        report(a, {.outcome = SpeechJob::Outcome::Failed, .error = std::move(error)});
        a.done = true;
    } else {
        a.opened = true;
        // audio-start goes with the first audio (send_audio()): a request
        // with none gets none, as from wyoming-piper.
        a.rate = a.job->rate();
    }
    a.ring();  // the text may all be in already, or the report made
}

bool WyomingSession::on_turn(bool granted) {
    if (!active_ || !active_->queued) return false;
    Active& a = *active_;
    a.queued = false;
    if (granted) {
        a.job->adopt_turn();
        open_job(a);
    } else {
        report(a, {.outcome = SpeechJob::Outcome::TimedOut});
        a.done = true;
        a.ring();
    }
    return true;
}

void WyomingSession::on_ready() {
    if (active_ && active_->opened && !active_->done) pump_audio(*active_);
    on_wake();
}

void WyomingSession::pump_audio(Active& a) {
    // Cleared before reading: a listener's call after this is not lost.
    a.pending->store(false, std::memory_order_release);
    const std::size_t queued = outbox_.pending();
    // A client that reads slowly holds its speech back here; its outbox's
    // draining (on_writable()) reads on.
    const std::size_t most = queued < kAudioRoom ? (kAudioRoom - queued) / sizeof(short) : 0;
    bool client_gone = false;
    SpeechJob::Result result;
    auto pumped = a.job->pump(
        most,
        [&](std::span<const float> samples) {
            if (client_gone) return;
            const std::size_t at = a.unsent.size();
            a.unsent.resize(at + samples.size());
            audio_io::float_to_pcm16(samples, std::span(a.unsent).subspan(at));
            client_gone = !send_audio(a, false);
        },
        result);
    if (client_gone && pumped == SpeechJob::Pumped::More) {
        a.job->cancel();
        pumped = a.job->pump(
            0, [](std::span<const float>) {}, result);
    }
    if (pumped == SpeechJob::Pumped::Done) {
        if (client_gone) result.outcome = SpeechJob::Outcome::Cancelled;
        report(a, result);
        a.done = true;
    }
}

bool WyomingSession::send_audio(Active& a, bool last) {
    // Chunks of --samples-per-chunk samples, as wyoming-piper cuts them;
    // the request's last one shorter.
    const std::size_t n = ctx_.wyoming.samples_per_chunk;
    std::size_t at = 0;
    bool ok = true;
    while (ok && (a.unsent.size() - at >= n || (last && at < a.unsent.size()))) {
        const std::size_t count = std::min(n, a.unsent.size() - at);
        if (!a.audio_started) {
            a.audio_started = true;
            ok = send("audio-start",
                      {{"rate", a.rate}, {"width", 2}, {"channels", 1}, {"timestamp", 0}});
            if (!ok) break;
        }
        // 16-bit little-endian: the host order on every platform we build for.
        std::string payload(reinterpret_cast<const char*>(a.unsent.data() + at), count * 2);
        ok = send("audio-chunk",
                  {{"rate", a.rate}, {"width", 2}, {"channels", 1}, {"timestamp", timestamp_ms(a)}},
                  std::move(payload));
        a.sent += count;
        at += count;
    }
    a.unsent.erase(a.unsent.begin(), a.unsent.begin() + std::ptrdiff_t(at));
    return ok;
}

std::uint64_t WyomingSession::timestamp_ms(const Active& a) {
    return a.rate > 0 ? a.sent * 1000 / std::uint64_t(a.rate) : 0;
}

void WyomingSession::report(Active& a, const SpeechJob::Result& result) {
    switch (result.outcome) {
        case SpeechJob::Outcome::Spoken:
            // What is left of the audio, then its end. A request that made
            // none says only that it has ended, as wyoming-piper does: a
            // synthesize its audio-stop, a stream its synthesize-stopped.
            send_audio(a, true);
            if (a.audio_started || !a.streaming)
                send("audio-stop", {{"timestamp", timestamp_ms(a)}});
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
    // A request the server could not speak ends the connection, as the
    // Python servers end it (wyoming-piper raises after its error event):
    // Home Assistant reads a plain synthesize's reply until audio-stop or
    // the connection's end, so an error alone would keep it waiting for
    // --idle-timeout.
    a.failed = result.outcome == SpeechJob::Outcome::Busy ||
               result.outcome == SpeechJob::Outcome::TimedOut ||
               result.outcome == SpeechJob::Outcome::Failed;
    const double audio_s = a.rate > 0 ? static_cast<double>(result.samples) / a.rate : 0.0;
    char line[512];
    std::snprintf(line, sizeof line,
                  "wyoming %s %s voice=%s chars=%zu first-audio=%.1fms rtf=%.3f audio=%.2fs %s",
                  peer_.c_str(), a.streaming ? "stream" : "synthesize", a.job->voice().name.c_str(),
                  a.job->characters(), result.first_audio_ms,
                  audio_s > 0 ? result.seconds / audio_s : 0.0, audio_s,
                  outcome_name(result.outcome));
    ctx_.log.write(line);
}

bool WyomingSession::job_running() const {
    return active_ && !active_->done;
}

void WyomingSession::poke() {
    if (active_ && !active_->done && active_->ring) active_->ring();
}

void WyomingSession::reap(bool cancel) {
    if (!active_) return;
    Active& a = *active_;
    if (cancel && !a.done && !a.cancelled) {
        a.cancelled = true;
        if (a.queued && queue_.withdraw(key())) {
            // It never started: reported here as a synthesis whose client left.
            a.queued = false;
            report(a, {.outcome = SpeechJob::Outcome::Cancelled});
            a.done = true;
        } else {
            a.job->cancel();
            a.ring();  // on_ready() reports it and reaps it
        }
    }
    if (a.done) {
        // (Over stdio the session goes on: refuse_request().)
        failed_request_ = failed_request_ || (a.failed && is_socket_);
        // Its stream ends here; its turn, given back, may be another's.
        active_.reset();
        loop_.wake();
    }
}

}  // namespace etude::server
