// The speaking thread: one message at a time, from 701 BEGIN to exactly one
// of 702 END, 703 STOP or 704 PAUSE.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/ssml_document.h"
#include "speechd/reply_writer.h"
#include "speechd/sound_icon.h"

namespace etude::speechd {

using engine::parse_message;
using engine::Piece;
using engine::spell_out;

/// A message ready to speak.
struct SpeechJob {
    std::vector<Piece> pieces;
    engine::StreamOptions options;
    engine::Prosody prosody;        // SET pitch; each text piece's <prosody> within it
    std::optional<SoundIcon> icon;  // SOUND_ICON with its file: sent instead of speech
    bool capital_cue = false;       // cap_let_recogn=icon: capital_cue() before the speech
    float gain = 1.0f;
};

/// Speaks jobs on its own thread and writes their events and audio.
///
/// Locking, and why STOP is never stuck behind audio:
///  * `out`'s mutex (the stdout mutex) is held for each whole message
///    written. A 705 write can block for as long as the server's audio
///    queue is full (it stops reading past ~10000 queued samples), and the
///    speaking thread holds the stdout mutex all that time.
///  * stop() and pause() never take the stdout mutex: they set a flag and
///    cancel the stream under `mu_`, which the speaking thread holds only
///    for moments and never while writing or reading audio. So the command
///    loop handles STOP at once, even while a write is blocked. The server
///    flushes its queue on STOP, which unblocks the write; the thread then
///    sees the flag before its next write and sends 703 instead of audio.
///  * Lock order is stdout mutex, then `mu_` (start_locked() is called with
///    the stdout mutex held); the speaking thread never takes them the
///    other way round.
class Speaker {
  public:
    Speaker(engine::Engine& engine, ReplyWriter& out);
    /// Stops what is being spoken and joins the thread.
    ~Speaker();
    Speaker(const Speaker&) = delete;
    Speaker& operator=(const Speaker&) = delete;

    /// Hands `job` to the thread. Call with out.mutex() held, and write
    /// "200 OK SPEAKING" before releasing it: the server starts listening
    /// for events only after that reply (0.11.4 deadlocks on an event that
    /// comes before it), and the thread's 701 needs the same mutex. The
    /// stop and pause flags are reset here, before the 200, because a STOP
    /// may follow it at once. The previous job must be over (wait_idle()).
    void start_locked(SpeechJob job);
    /// STOP: the current message ends with 703 and no more audio. No-op
    /// when idle (the server sends STOPs after a message has ended too).
    void stop();
    /// PAUSE: the current message ends with 704 at its next "__spd_" mark
    /// (or 702 if it ends first).
    void pause();
    /// Waits until no message is being spoken.
    void wait_idle();
    bool busy() const;
    /// A message has begun and its ending (702, 703 or 704) is not yet
    /// sent: a SPEAK now is refused, as the reference modules refuse it.
    bool speaking() const { return speaking_.load(); }

  private:
    enum class Ending { End, Stop, Pause };
    void run();
    void speak(SpeechJob& job);
    // Sends the stream's audio until it has all been delivered, and each
    // mark's 700 when the audio sent reaches it.
    enum class Pumped { Done, Stopped, Paused };
    // `mapped`: the client's marks pushed under another name (speaker.cpp).
    Pumped pump(engine::Stream& stream, float gain, int rate,
                const std::vector<std::string>& mapped);
    bool send_audio(std::span<const float> samples, float gain, int rate);

    engine::Engine& engine_;
    ReplyWriter& out_;
    mutable std::mutex mu_;  // guards the fields below; see the class comment
    std::condition_variable cv_;
    std::optional<SpeechJob> pending_;
    bool running_ = false;  // a job is pending or being spoken
    bool quit_ = false;
    engine::Stream* stream_ = nullptr;  // the job's stream, for stop() to cancel
    std::atomic<bool> stop_{false}, pause_{false};
    std::atomic<bool> speaking_{false};  // from start_locked() to the ending's send
    std::vector<short> pcm_;             // scratch, speaking thread only
    std::thread thread_;                 // last: starts after everything it uses exists
};

}  // namespace etude::speechd
