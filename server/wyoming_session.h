// One Wyoming client from connection to close, as a state machine the event
// loop drives (wyoming_server.h): it reads the client's events, answers
// describe and ping at once, runs its syntheses (one at a time, as events
// on the same loop: synthesis_queue.h; the connection keeps being read
// meanwhile: text chunks arrive, and a client that leaves cancels the
// speech), and closes the connection on a malformed frame, after an error
// event saying why. A client costs its socket, its buffered bytes, this
// object and, while it is spoken to, its stream; never a thread.
// wyoming_session_speech.cpp holds the speech's half.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "server/connection_limiter.h"
#include "server/event_loop.h"
#include "server/outbox.h"
#include "server/server_context.h"
#include "server/speech_job.h"
#include "server/synthesis_queue.h"
#include "server/wyoming_frame.h"

namespace etude::server {

class WyomingSession {
  public:
    using Clock = std::chrono::steady_clock;

    // A socket (owned, closed at the end; `ticket` its place in the
    // listener's limits) or standard input and output (neither closed).
    // The loop must already watch `in_fd`.
    WyomingSession(int in_fd, int out_fd, bool is_socket, std::string peer,
                   std::optional<ConnectionLimiter::Ticket> ticket, const ServerContext& context,
                   SynthesisQueue& queue, std::uint64_t serial, EventLoop& loop);
    // Only once over(): no synthesis is left running.
    ~WyomingSession();
    WyomingSession(const WyomingSession&) = delete;
    WyomingSession& operator=(const WyomingSession&) = delete;

    // On the loop thread. `buffer`: scratch space for one read, shared by
    // every session of the loop.
    void on_readable(char* buffer, std::size_t size);
    void on_writable();
    // Deadlines: a frame arriving too slowly, an idle client, a client
    // that reads nothing.
    void on_tick(Clock::time_point now);
    // Reaps a synthesis that has ended (also called by on_ready()).
    void on_wake();
    // Its synthesis's stream has audio or has ended, or the session poked
    // itself: what is ready is read and sent, then a synthesis that has
    // ended is reaped.
    void on_ready();
    // The turn it waited for is its now (`granted`), or the wait timed out;
    // false when it no longer waits (the caller gives the turn back).
    bool on_turn(bool granted);
    // Its key on the queue (a socket's number is used again: the serial
    // tells the sessions apart).
    SynthesisQueue::Key key() const { return {in_fd_, serial_}; }
    // The server stops: the synthesis is cancelled, the connection closed.
    void stop();
    // Closed, and no synthesis left: the session may be destroyed.
    bool over() const;
    // Closed: the loop no longer watches the socket.
    bool closed() const { return stage_ == Stage::Closed; }

  private:
    struct Active;
    // Open: reading events. Draining: the client closed its side after a
    // complete request; its speech is finished and sent, then the
    // connection closes. Lingering: after a protocol error, the error event
    // is sent, our side shut, and what the client still sends dropped for
    // up to 0.5 s (closing with its bytes unread would reset the connection
    // and destroy the error before the client reads it). Closed.
    enum class Stage { Open, Draining, Lingering, Closed };

    bool send(const std::string& type, nlohmann::json data = nlohmann::json::object(),
              std::string payload = {});
    void send_error(const std::string& text, const std::string& code) {
        send("error", {{"text", text}, {"code", code}});
    }
    // Feeds what was read (nothing: takes up the events already read) and
    // handles its events until kPauseReading bytes wait to be sent; false:
    // close the connection.
    bool take_input(std::string_view bytes);
    // take_input(), then closes the connection where it says so, or pauses
    // reading where the replies owed pass kPauseReading.
    void take_and_settle(std::string_view bytes);
    // false: close the connection.
    bool handle(const WyomingEvent& ev);
    // handle(), an exception from it sent as an error event (then linger()).
    bool take_event(const WyomingEvent& ev);
    // Keeps `ev` (a synthesize or synthesize-start) until the synthesis
    // being spoken is reaped (on_wake); no other event is taken meanwhile.
    bool hold(const WyomingEvent& ev);
    // The voice (and the speaker, "" for the default) a request asks for.
    const VoiceEntry* choose_voice(const nlohmann::json& data, std::string& speaker,
                                   std::string& error) const;
    // False: refused at once (busy), the error sent.
    bool start_job(const VoiceEntry& voice, const std::string& speaker, bool streaming);
    // A request that cannot be spoken (its error event sent, or its
    // synthesis ended busy or failed) ends the connection as the Python
    // servers end it: the error is delivered, our side shut (linger()).
    // Returns false, for handle().
    bool refuse_request();
    // The stream, once the turn is held; a failure reported.
    void open_job(Active& active);
    // Reads what is ready, as far as the outbox has room, and sends it;
    // reports the synthesis once it has ended.
    void pump_audio(Active& active);
    // Puts the session on the ready list (after text, an end or a cancel).
    void poke();
    void report(Active& active, const SpeechJob::Result& result);
    // The audio made and not yet sent, in whole chunks
    // (all of it when `last`), audio-start before the first; false when
    // the client is gone.
    bool send_audio(Active& active, bool last);
    // The audio sent so far, in ms (audio-chunk's and audio-stop's timestamp).
    static std::uint64_t timestamp_ms(const Active& active);
    // Forgets a synthesis that has ended; with `cancel`, stops one first
    // (it is forgotten once it ends).
    void reap(bool cancel);
    bool job_running() const;
    // The client closed its side (read returned 0).
    void on_input_closed();
    void linger();
    // Reads the client again once a paused outbox has drained.
    void resume_reading();
    void close();
    void update_frame_deadline();

    int in_fd_, out_fd_;
    const bool is_socket_;
    const std::string peer_;
    std::optional<ConnectionLimiter::Ticket> ticket_;
    const ServerContext& ctx_;
    SynthesisQueue& queue_;
    const std::uint64_t serial_;
    EventLoop& loop_;
    Outbox outbox_;
    WyomingFrameReader reader_;
    Stage stage_ = Stage::Open;
    Clock::time_point last_input_ = Clock::now();
    Clock::time_point linger_until_{};
    bool shut_write_ = false;
    // Not read while more than kPauseReading bytes wait to be sent: a client
    // that sends requests and reads no replies fills its own socket, not
    // our memory, until --write-timeout drops it. The events of one read
    // past that point wait in reader_ too (take_input), since one read can
    // hold thousands of small requests.
    bool paused_ = false;
    static constexpr std::size_t kPauseReading = 256 * 1024;
    // A frame begun must arrive whole in time, however it trickles in: its
    // header line within --header-timeout, then the rest within
    // --body-timeout (the idle timeout restarts with every byte).
    enum class Part { None, Header, Rest } part_ = Part::None;
    Clock::time_point part_deadline_{};
    std::unique_ptr<Active> active_;
    bool failed_request_ = false;       // a request failed: the connection is ending
    std::optional<WyomingEvent> held_;  // the next request, waiting (hold())
};

// The `info` answer to `describe`: one TTS program with every voice.
nlohmann::json wyoming_info(const VoiceCatalog& voices, bool streaming = true);

}  // namespace etude::server
