#include "server/speech_job.h"

#include <algorithm>

namespace etude::server {

namespace {

// Audio goes out in pieces that start small (the first arrives after 16 ms
// of speech is made) and grow to 256 ms, so a reply starts at once and a
// long one is not sent as thousands of tiny events.
constexpr std::size_t kFirstPiece = 256, kLargestPiece = 4096;
// How long run() waits for audio that is on its way before it looks at its
// own state again (a cancel, new text); a stall that long is rare.
constexpr int kAudioWaitMs = 200;

}  // namespace

engine::StreamOptions network_stream_options(engine::StreamOptions options) {
    // Nobody hears a network client's audio late, and its audio must
    // equal the offline render: never trade quality for time. (read()
    // already never does; this says it for the block scheduler too.)
    options.allow_reduced_tier = false;
    // No audio callback waits on this stream: its reader is a socket. At
    // real-time priority, streams computing as fast as their clients take
    // audio would starve the connection threads that send it.
    options.scheduling = engine::SchedulingClass::Network;
    return options;
}

SpeechJob::SpeechJob(const ServerContext& context, const VoiceEntry& voice, std::string speaker)
    : context_(context), voice_(voice), options_(voice.options) {
    auto* piper = std::get_if<engine::PiperVoiceOptions>(&options_.voice);
    if (piper && !speaker.empty()) piper->speaker = std::move(speaker);
}

void SpeechJob::add_text(std::string text) {
    {
        std::lock_guard lock(mu_);
        if (finished_ || cancelled_) return;
        if (!have_text_) {
            first_text_ = Clock::now();
            have_text_ = true;
        }
        characters_ += text.size();
        ++text_events_;
        // Once run() has its stream, pieces go straight in (the stream is the
        // place text waits for its sentence to end); before, they wait here.
        if (stream_)
            push_locked(text);
        else
            pending_.push_back(std::move(text));
    }
    cv_.notify_all();
}

void SpeechJob::finish() {
    {
        std::lock_guard lock(mu_);
        finished_ = true;
        ++text_events_;
        if (stream_) end_input_locked();
    }
    cv_.notify_all();
}

void SpeechJob::push_locked(const std::string& text) {
    if (!push_error_.empty()) return;
    try {
        stream_->push_text(text);
    } catch (const std::exception& e) {
        push_error_ = e.what();
        stream_->cancel();
    }
}

void SpeechJob::end_input_locked() {
    if (input_ended_ || !push_error_.empty()) return;
    input_ended_ = true;
    try {
        stream_->end_input();
    } catch (const std::exception& e) {
        push_error_ = e.what();
        stream_->cancel();
    }
}

void SpeechJob::cancel() {
    {
        std::lock_guard lock(mu_);
        cancelled_ = true;
        if (stream_) stream_->cancel();
    }
    cv_.notify_all();
}

SpeechJob::~SpeechJob() {
    if (owned_) {
        {
            std::lock_guard lock(mu_);
            stream_ = nullptr;
        }
        owned_.reset();  // before its turn goes to another
    }
    if (has_turn_) context_.slots.release();
}

std::string SpeechJob::open(std::function<void()> listener) {
    try {
        owned_ = context_.engine.create_stream(network_stream_options(options_));
    } catch (const std::exception& e) {
        return e.what();
    }
    owned_->set_audio_listener(std::move(listener));
    rate_ = static_cast<int>(owned_->sample_rate());
    pump_buffer_.resize(kLargestPiece);
    publish(owned_.get());
    return {};
}

void SpeechJob::publish(engine::Stream* stream) {
    std::lock_guard lock(mu_);
    stream_ = stream;
    if (cancelled_) stream_->cancel();
    for (const auto& t : pending_) push_locked(t);
    pending_.clear();
    if (finished_) end_input_locked();
}

SpeechJob::Pumped SpeechJob::pump(std::size_t most,
                                  const std::function<void(std::span<const float>)>& audio,
                                  Result& result) {
    std::size_t given = 0;
    for (;;) {
        {
            std::lock_guard lock(mu_);
            if (cancelled_) {
                pumped_.outcome = Outcome::Cancelled;
                break;
            }
            if (!push_error_.empty()) {
                pumped_.outcome = Outcome::Failed;
                pumped_.error = push_error_;
                result = pumped_;
                return Pumped::Done;
            }
        }
        const std::size_t room = std::min(pump_buffer_.size(), most - std::min(most, given));
        const std::size_t n =
            room == 0 ? 0 : owned_->read_some(std::span(pump_buffer_).first(room), 0);
        if (n == 0) {
            // Nothing more now: everything given has been spoken, or more
            // is on its way (the listener rings), or the caller has no room.
            std::lock_guard lock(mu_);
            if (room > 0 && input_ended_ && !owned_->busy()) {
                pumped_.outcome = Outcome::Spoken;
                break;
            }
            return Pumped::More;
        }
        last_pumped_ = Clock::now();
        note_delivered(pumped_, n, last_pumped_);
        given += n;
        audio(std::span<const float>(pump_buffer_).first(n));
    }
    if (pumped_.outcome == Outcome::Cancelled) owned_->cancel();
    finish_result(pumped_, *owned_, last_pumped_);
    result = pumped_;
    return Pumped::Done;
}

void SpeechJob::note_delivered(Result& result, std::size_t samples, Clock::time_point now) {
    if (result.samples == 0) {
        std::lock_guard lock(mu_);
        result.first_audio_ms =
            std::chrono::duration<double, std::milli>(now - first_text_).count();
    }
    result.samples += samples;
}

void SpeechJob::finish_result(Result& result, engine::Stream& stream,
                              Clock::time_point last_audio) {
    const engine::StreamStats stats = stream.stats();
    result.gpu_chunks = stats.mel_chunks_gpu;
    result.chunks = stats.mel_chunks_gpu + stats.mel_chunks_cpu + stats.mel_chunks_phase;
    std::lock_guard lock(mu_);
    if (have_text_ && result.samples > 0)
        result.seconds = std::chrono::duration<double>(last_audio - first_text_).count();
}

SpeechJob::Outcome SpeechJob::take_turn() {
    if (has_turn_) return Outcome::Spoken;
    const auto abandoned = [&] {
        std::lock_guard lock(mu_);
        return cancelled_;
    };
    switch (context_.slots.acquire(context_.limits.queue_timeout, abandoned)) {
        case SynthesisSlots::Outcome::Granted:
            has_turn_ = true;
            return Outcome::Spoken;
        case SynthesisSlots::Outcome::Busy:
            return Outcome::Busy;
        case SynthesisSlots::Outcome::TimedOut:
            return Outcome::TimedOut;
        case SynthesisSlots::Outcome::Abandoned:
            return Outcome::Cancelled;
    }
    return Outcome::Failed;
}

std::size_t SpeechJob::characters() const {
    std::lock_guard lock(mu_);
    return characters_;
}

SpeechJob::Result SpeechJob::run(const std::function<bool(int rate)>& start,
                                 const std::function<bool(std::span<const float>)>& audio) {
    Result result;
    if (!has_turn_) {
        result.outcome = take_turn();
        if (result.outcome != Outcome::Spoken) return result;
    }
    struct TurnGuard {
        SpeechJob& job;
        ~TurnGuard() {
            job.context_.slots.release();
            job.has_turn_ = false;
        }
    } turn{*this};

    std::unique_ptr<engine::Stream> stream;
    try {
        stream = context_.engine.create_stream(network_stream_options(options_));
    } catch (const std::exception& e) {
        result.error = e.what();
        return result;
    }
    publish(stream.get());
    // Unpublish before the stream dies, so no other thread touches a dead one.
    struct Unpublish {
        SpeechJob& job;
        ~Unpublish() {
            std::lock_guard lock(job.mu_);
            job.stream_ = nullptr;
        }
    } unpublish{*this};

    const int rate = static_cast<int>(stream->sample_rate());
    bool client_gone = !start(rate);
    std::vector<float> buffer(kLargestPiece);
    std::size_t piece = kFirstPiece;
    Clock::time_point last_audio{};
    std::uint64_t seen_text = 0;
    while (!client_gone) {
        {
            std::lock_guard lock(mu_);
            if (cancelled_) break;
            if (!push_error_.empty()) {
                result.error = push_error_;
                return result;
            }
            // Everything given has been spoken.
            if (input_ended_ && !stream->busy()) break;
            seen_text = text_events_;
        }
        // A piece of at most `piece` samples: what is made once some is, and
        // no more waiting for the rest. A network stream is kept only a
        // little ahead of its listener while other streams wait to start
        // (engine/scheduling/deadline.h), so holding audio back to fill a piece would
        // make the client wait for it (read_some returns at once when none
        // is on its way).
        std::size_t got = 0;
        while (got < piece) {
            const std::size_t n = stream->read_some(std::span(buffer).subspan(got, piece - got),
                                                    got == 0 ? kAudioWaitMs : 0);
            if (n == 0) break;
            got += n;
        }
        if (got == 0) {
            // Nothing on its way: the stream waits for the client's next
            // text (or the end of it). A cancel or a refused piece also
            // wakes this; the bound covers a producer slower than the wait.
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, std::chrono::milliseconds(kAudioWaitMs), [&] {
                return cancelled_ || text_events_ != seen_text || !push_error_.empty();
            });
            piece = kFirstPiece;  // the next sentence's first audio goes out at once
            continue;
        }
        {
            std::lock_guard lock(mu_);
            if (cancelled_) break;
        }
        if (!audio(std::span<const float>(buffer).first(got))) {
            client_gone = true;
            break;
        }
        last_audio = Clock::now();
        note_delivered(result, got, last_audio);
        piece = std::min(piece * 2, kLargestPiece);
    }
    finish_result(result, *stream, last_audio);
    bool cancelled;
    {
        std::lock_guard lock(mu_);
        cancelled = cancelled_;
    }
    if (client_gone || cancelled) {
        stream->cancel();
        result.outcome = Outcome::Cancelled;
    } else {
        result.outcome = Outcome::Spoken;
    }
    return result;
}

}  // namespace etude::server
