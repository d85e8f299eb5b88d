#include "speechd/speaker.h"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "speechd/audio_block.h"
#include "speechd/log.h"

namespace etude::speechd {

namespace {

// Audio per 705 event: from 16 ms to 128 ms at 16 kHz. Small enough that
// the first event leaves soon and a STOP discards little; the largest is
// about the 10000 bytes speech-dispatcher's own modules send at most.
constexpr std::size_t kFirstPiece = 256, kLargestPiece = 2048;
// How long one read waits for audio before the thread looks at the stop
// flag again (a cancel wakes it sooner).
constexpr int kReadWaitMs = 20;

// A client's mark whose name the engine cannot hold (over
// SpeechMark::kMaxName bytes) or the 700 line cannot carry (a line break),
// or that looks like one of these, goes into the stream under this prefix
// and its index in the message's table, and is reported by its own name.
constexpr std::string_view kMappedMark = "__sd_etude_mark_";

bool needs_mapping(const std::string& name) {
    return name.size() > engine::SpeechMark::kMaxName ||
           name.find_first_of("\r\n") != std::string::npos || name.starts_with(kMappedMark);
}

// The name a 700 line carries: the server reads events line by line, so a
// line break in a client's mark becomes a space.
std::string reported_name(const std::string& stream_name, const std::vector<std::string>& mapped) {
    std::string name = stream_name;
    if (name.starts_with(kMappedMark)) {
        const std::size_t i = std::stoul(name.substr(kMappedMark.size()));
        if (i < mapped.size()) name = mapped[i];
    }
    std::replace(name.begin(), name.end(), '\n', ' ');
    std::replace(name.begin(), name.end(), '\r', ' ');
    return name;
}

}  // namespace

Speaker::Speaker(engine::Engine& engine, ReplyWriter& out)
    : engine_(engine), out_(out), thread_([this] { run(); }) {}

Speaker::~Speaker() {
    {
        std::lock_guard lock(mu_);
        quit_ = true;
        stop_ = true;
        if (stream_) stream_->cancel();
    }
    cv_.notify_all();
    thread_.join();
}

void Speaker::start_locked(SpeechJob job) {
    {
        std::lock_guard lock(mu_);
        stop_ = false;
        pause_ = false;
        pending_ = std::move(job);
        running_ = true;
        speaking_ = true;
    }
    cv_.notify_all();
}

void Speaker::stop() {
    std::lock_guard lock(mu_);
    if (!running_) return;
    stop_ = true;
    if (stream_) stream_->cancel();
}

void Speaker::pause() {
    std::lock_guard lock(mu_);
    if (running_) pause_ = true;
}

void Speaker::wait_idle() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !running_; });
}

bool Speaker::busy() const {
    std::lock_guard lock(mu_);
    return running_;
}

void Speaker::run() {
    // speech-dispatcher's rule for a module's extra threads: signals go to
    // the main thread only.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    for (;;) {
        SpeechJob job;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return quit_ || pending_.has_value(); });
            if (quit_) return;
            job = std::move(*pending_);
            pending_.reset();
        }
        speak(job);
        {
            std::lock_guard lock(mu_);
            running_ = false;
        }
        cv_.notify_all();
    }
}

void Speaker::speak(SpeechJob& job) {
    // Every ending must follow a BEGIN, even for a message stopped at once.
    out_.send("701 BEGIN\n");
    std::unique_ptr<engine::Stream> stream;
    try {
        if (!job.icon) stream = engine_.create_stream(job.options);
    } catch (const std::exception& e) {
        log_line(1, std::string("cannot make a stream: ") + e.what());
    }
    {
        std::lock_guard lock(mu_);
        stream_ = stream.get();
        if (stop_ && stream_) stream_->cancel();
    }
    Ending ending = Ending::End;
    const int rate = stream ? static_cast<int>(stream->sample_rate()) : 16000;
    if (job.icon) {
        // The icon's file as it is, at its own rate, in pieces a STOP can cut.
        const std::span<const float> all(job.icon->samples);
        for (std::size_t at = 0; at < all.size() && !stop_; at += kLargestPiece)
            if (!send_audio(all.subspan(at, std::min(kLargestPiece, all.size() - at)), job.gain,
                            job.icon->rate))
                break;
    } else if (stream && !stop_) {
        if (job.capital_cue) send_audio(capital_cue(rate), job.gain, rate);
        std::vector<std::string> mapped;  // marks pushed under another name
        // The whole message into the stream at once, so the engine works
        // ahead across sentences and marks; each mark comes back with the
        // sample where its audio position is, and pump() sends its 700 when
        // the audio sent reaches it.
        try {
            for (const Piece& piece : job.pieces) {
                if (piece.kind == Piece::Kind::Text) {
                    stream->set_prosody(piece.prosody.within(job.prosody));
                    stream->push_text(piece.text);
                } else if (piece.kind == Piece::Kind::Silence) {
                    stream->push_break(piece.silence_ms);
                } else if (needs_mapping(piece.text)) {
                    stream->push_mark(std::string(kMappedMark) + std::to_string(mapped.size()));
                    mapped.push_back(piece.text);
                } else {
                    stream->push_mark(piece.text);
                }
            }
            stream->end_input();
        } catch (const std::exception& e) {
            log_line(1, std::string("message refused: ") + e.what());
            stream->cancel();
        }
        if (pump(*stream, job.gain, rate, mapped) == Pumped::Paused) ending = Ending::Pause;
    }
    if (stop_) ending = Ending::Stop;
    {
        std::lock_guard lock(mu_);
        stream_ = nullptr;
    }
    if (stream && ending != Ending::End) stream->cancel();
    // Before the ending goes out: the server may send the next SPEAK as
    // soon as it reads it, and it must not be refused.
    speaking_ = false;
    switch (ending) {
        case Ending::End:
            out_.send("702 END\n");
            break;
        case Ending::Stop:
            out_.send("703 STOP\n");
            break;
        case Ending::Pause:
            out_.send("704 PAUSE\n");
            break;
    }
    // The stream (and its thread) goes after the ending is out, so the
    // server hears 703 without waiting for it.
}

Speaker::Pumped Speaker::pump(engine::Stream& stream, float gain, int rate,
                              const std::vector<std::string>& mapped) {
    std::vector<float> buffer(kLargestPiece);
    std::deque<engine::SpeechMark> marks;
    std::uint64_t sent = 0;  // samples of the stream sent so far
    // The marks at or before `sent`, each as its 700 before any audio after
    // it; true when a PAUSE stops the message at one. A mark is recorded
    // before any audio after it is made, so it is in the queue by the time
    // that audio has been read.
    const auto send_marks_reached = [&]() {
        engine::SpeechMark m;
        while (stream.next_mark(m)) marks.push_back(m);
        while (!marks.empty() && marks.front().sample <= sent) {
            const std::string name = reported_name(marks.front().name, mapped);
            marks.pop_front();
            out_.send("700-" + name + "\n700 INDEX MARK\n");
            // The server pauses its playback at the first __spd_ mark after
            // a PAUSE and resumes from it later; a client's own mark is no
            // place to stop.
            if (pause_ && name.rfind("__spd_", 0) == 0) return true;
        }
        return false;
    };
    // The engine hands out 10 ms blocks; they are gathered into pieces that
    // start small, so the first audio leaves at once, and grow, so a long
    // message is not thousands of tiny events. A piece read across a mark
    // (its audio after the mark may be read before the mark is seen) is
    // sent in two, with the 700 between.
    std::size_t piece = kFirstPiece;
    for (;;) {
        if (send_marks_reached()) return Pumped::Paused;
        std::size_t got = 0;
        while (got < piece) {
            if (stop_ || out_.broken()) return Pumped::Stopped;
            const std::size_t n =
                stream.read_some(std::span(buffer).subspan(got, piece - got), kReadWaitMs);
            if (n == 0) {
                if (!stream.busy()) break;
                if (got > 0) break;  // a stall: send what is here rather than sit on it
                continue;
            }
            got += n;
        }
        if (got == 0) {
            // Everything is out: the marks at its very end remain.
            if (send_marks_reached()) return Pumped::Paused;
            return stop_ ? Pumped::Stopped : Pumped::Done;
        }
        for (std::size_t from = 0; from < got;) {
            // Marks recorded while this piece was read, and those reached.
            if (send_marks_reached()) return Pumped::Paused;
            std::size_t to = got;
            if (!marks.empty() && marks.front().sample < sent + (got - from))
                to = from + static_cast<std::size_t>(marks.front().sample - sent);
            if (!send_audio(std::span<const float>(buffer).subspan(from, to - from), gain, rate))
                return Pumped::Stopped;
            sent += to - from;
            from = to;
        }
        piece = std::min(piece * 2, kLargestPiece);
    }
}

bool Speaker::send_audio(std::span<const float> samples, float gain, int rate) {
    // Checked just before writing: after a STOP no audio may follow (a
    // write already under way when STOP arrives is discarded by the server).
    if (stop_) return false;
    to_pcm16(samples, gain, pcm_);
    return out_.send(encode_audio_event(pcm_, rate));
}

}  // namespace etude::speechd
