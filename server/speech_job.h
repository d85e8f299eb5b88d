// One request's speech, whatever the protocol: text in (all at once, or
// sentence by sentence as a stream delivers it), audio out through a
// callback as the engine makes it, on a stream of its own opened on the
// server's one engine once a synthesis slot is free.
//
// Threads: run() on one thread (it blocks until the speech is done);
// add_sentences(), finish() and cancel() from any other.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "server/server_context.h"

namespace etude::server {

// The options a network client's stream is made with, from its voice's:
// audio equal to the offline render, and no real-time workers (its reader
// is a socket). The server's capacity is measured with them too.
engine::StreamOptions network_stream_options(engine::StreamOptions voice_options);

class SpeechJob {
  public:
    // `speaker`: a speaker of a voice with several, by name; "" its default.
    SpeechJob(const ServerContext& context, const VoiceEntry& voice, std::string speaker = {});
    ~SpeechJob();  // gives back a turn taken and not used
    SpeechJob(const SpeechJob&) = delete;
    SpeechJob& operator=(const SpeechJob&) = delete;

    // Before run(): the output rate (8000..192000 Hz) instead of the voice's
    // own, and a Piper voice's length_scale instead of its config's (the
    // HTTP endpoint's `sample_rate` and `speed`).
    void set_sample_rate(double hz) { options_.sample_rate = hz; }
    void set_length_scale(float scale) {
        std::visit(
            [&](auto& voice) {
                if constexpr (requires { voice.length_scale; }) voice.length_scale = scale;
            },
            options_.voice);
    }

    // Text for the stream, in pieces cut anywhere (the engine holds an
    // unfinished sentence until more text or finish()); spoken in order.
    void add_text(std::string text);
    // No more text will come: the input ends, and run() returns once the
    // rest is spoken.
    void finish();
    // Stop now: the stream is cancelled and run() returns soon.
    void cancel();

    enum class Outcome { Spoken, Cancelled, Busy, TimedOut, Failed };
    // Waits for a synthesis slot (SynthesisSlots: bounded waiting, then
    // busy). run() does this itself; a protocol that must answer "busy"
    // before it starts its reply (HTTP's status line) calls it first.
    // Returns Spoken when the turn is granted.
    Outcome take_turn();
    struct Result {
        Outcome outcome = Outcome::Failed;
        std::string error;           // for Failed
        std::uint64_t samples = 0;   // audio delivered
        double first_audio_ms = -1;  // first text given to first audio delivered
        double seconds = 0;          // first text to the last audio delivered
        // A Piper voice's decoder: chunks made on the GPU tier, and in all
        // (the rest by the CPU); both 0 for other voices.
        std::uint64_t gpu_chunks = 0, chunks = 0;
    };
    // `start` is called once with the output rate before any audio;
    // `audio` with each piece as it is made; either returning false means
    // the client is gone and cancels the job.
    Result run(const std::function<bool(int rate)>& start,
               const std::function<bool(std::span<const float>)>& audio);

    // Event-driven, on a loop thread in place of run() (Wyoming's:
    // synthesis_queue.h). adopt_turn(): a turn the caller took from the
    // slots is this job's (given back when it ends). open(): the stream,
    // its audio listener set; "" or why it could not be made. pump(): the
    // audio ready now, at most `most` samples, handed to `audio` in
    // pieces; Done once everything given is spoken (or the job was
    // cancelled or refused), with `result` filled, else More: call again
    // when the listener rings or the caller has room again.
    void adopt_turn() { has_turn_ = true; }
    std::string open(std::function<void()> listener);
    int rate() const { return rate_; }
    enum class Pumped { More, Done };
    Pumped pump(std::size_t most, const std::function<void(std::span<const float>)>& audio,
                Result& result);

    const VoiceEntry& voice() const { return voice_; }
    std::size_t characters() const;  // text given so far, in bytes

  private:
    using Clock = std::chrono::steady_clock;
    // With mu_ held and a stream: hand it a piece, or end its input; a
    // refusal is kept for run() to report, and stops the stream.
    void push_locked(const std::string& text);
    void end_input_locked();
    const ServerContext& context_;
    const VoiceEntry& voice_;
    engine::StreamOptions options_;  // the voice's, with the request's speaker, rate, pace
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::string> pending_;  // text given before run() opened the stream
    bool input_ended_ = false;         // the stream's input has been ended (finish())
    std::uint64_t text_events_ = 0;    // add_text() and finish() calls, for run() to wait on
    std::string push_error_;           // the stream refused a piece (bad UTF-8)
    std::size_t characters_ = 0;
    bool finished_ = false, cancelled_ = false;
    Clock::time_point first_text_{};
    bool have_text_ = false;
    // The stream is made: the text given so far (and a cancel or the end)
    // goes in, and what comes later goes straight to it.
    void publish(engine::Stream* stream);
    // `samples` more delivered at `now` (the first: first audio).
    void note_delivered(Result& result, std::size_t samples, Clock::time_point now);
    // The stream's counters and the times, into a finished result.
    void finish_result(Result& result, engine::Stream& stream, Clock::time_point last_audio);
    engine::Stream* stream_ = nullptr;  // while run() or open() has one; guarded by mu_
    bool has_turn_ = false;             // holds a synthesis slot
    // open()'s stream, read by pump(), and what pump() has delivered.
    // Declared last: destroyed before the turn is given back (~SpeechJob).
    std::vector<float> pump_buffer_;
    int rate_ = 0;
    Result pumped_;
    Clock::time_point last_pumped_{};
    std::unique_ptr<engine::Stream> owned_;
};

}  // namespace etude::server
