// A Wyoming session's synthesis, from its start until the loop reaps it:
// shared by the two files of WyomingSession (wyoming_session.cpp, the
// connection; wyoming_session_speech.cpp, its speech). Internal.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "server/end_punctuation.h"
#include "server/markdown_asterisks.h"
#include "server/speech_job.h"
#include "server/wyoming_session.h"

namespace etude::server {

struct WyomingSession::Active {
    explicit Active(const EndPunctuation& rule) : text_end(rule) {}
    std::unique_ptr<SpeechJob> job;
    EndPunctuation::Follower text_end;  // a stream's text, for its final mark
    MarkdownAsterisks asterisks;        // a stream's text, before text_end
    bool streaming = false;
    bool stopped = false;        // synthesize-stop seen
    std::size_t text_bytes = 0;  // streamed so far, against --max-text
    bool queued = false;         // in line for a turn (synthesis_queue.h)
    bool opened = false;         // its stream is made; pump() reads it
    bool cancelled = false;      // cancel() called by the loop
    bool done = false;           // reported; nothing of it runs any more
    bool over_limit = false;     // stopped for text past --max-text
    bool failed = false;         // busy, timed out or failed: the connection ends
    // Set by the stream's listener (and poke()), cleared before each pump:
    // the session is on the queue's ready list.
    std::shared_ptr<std::atomic<bool>> pending = std::make_shared<std::atomic<bool>>(false);
    std::function<void()> ring;  // the listener: puts the session on the ready list
    // The audio's rate, whether audio-start has gone (with the first
    // audio), the samples sent, and those made and not yet sent (less than
    // a chunk).
    int rate = 0;
    bool audio_started = false;
    std::uint64_t sent = 0;
    std::vector<short> unsent;
};

}  // namespace etude::server
