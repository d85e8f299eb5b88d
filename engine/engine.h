// The C++ API: an Engine loads voices and owns the workers; a Stream takes
// text and hands out audio at the rate its owner asked for.
//
// Threads:
//  * Engine and Stream methods may be called from any non-real-time thread.
//  * Stream::pull() is the real-time entry point: call it from exactly one
//    thread (the audio callback). It never allocates, locks, blocks or does
//    I/O, and never throws; it reports problems through stats() counters.
//  * Stream::read() is pull()'s blocking sibling for offline consumers (files,
//    pipes); use one or the other on a stream, not both at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"

namespace etude::engine {

class StreamCore;
class EngineCore;

struct StreamOptions {
    std::string voice = "slt";     // "slt", "rms" or "awb"
    double sample_rate = 16000.0;  // output rate, 8000..192000 Hz
    // Audio produced ahead of the consumer; bounds memory and how far the
    // workers may run ahead of a real-time reader.
    double buffer_seconds = 0.5;
    double cancel_fade_ms = 5.0;  // fade length when speech is cancelled
};

// Counters, read with relaxed atomics: each is exact, the set is a snapshot
// taken one field at a time.
struct StreamStats {
    std::uint64_t samples_delivered = 0;  // output samples handed out by pull()/read()
    std::uint64_t underruns = 0;          // pull() calls that had to pad speech with silence
    std::uint64_t underrun_samples = 0;   // samples of silence padded inside speech
    std::uint64_t sentences_queued = 0;
    std::uint64_t sentences_spoken = 0;
    std::uint64_t sentences_dropped = 0;  // cancelled before or while being spoken
    std::uint64_t frames_vocoded = 0;     // 5 ms parameter frames turned into audio
    std::uint64_t cancels = 0;
    double first_audio_ms = -1.0;   // push_text() to first sample ready, last utterance
    double frontend_seconds = 0.0;  // time spent in text analysis
    double vocoder_seconds = 0.0;   // time spent in vocoding and resampling
};

class Stream {
  public:
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Queues text to be spoken after what is already queued. Throws
    // etude::Error for invalid UTF-8; text with nothing speakable is ignored
    // and reported by the return value (number of sentences queued).
    std::size_t push_text(std::string_view text);

    // Real-time: fills `out` with the next samples; pads with silence where
    // none are ready (counted as an underrun while speech is in progress).
    // Returns how many samples were real audio.
    std::size_t pull(std::span<float> out) noexcept;

    // Blocking read for offline use: waits for audio, returns the number of
    // samples written (less than out.size() only when speech has ended);
    // returns 0 once everything queued has been delivered.
    std::size_t read(std::span<float> out);

    // Stops speaking within one pull() with a short fade, and drops all
    // queued text. Text pushed afterwards is spoken normally.
    void cancel();

    // True while text is queued or audio is not yet delivered.
    bool busy() const;
    double sample_rate() const;
    const std::string& voice() const;
    StreamStats stats() const;

  private:
    friend class Engine;
    explicit Stream(std::shared_ptr<StreamCore> core);
    std::shared_ptr<StreamCore> core_;
};

class Engine {
  public:
    struct Options {
        std::vector<std::string> preload_voices{"slt"};
    };
    Engine();
    explicit Engine(Options options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    static const std::vector<std::string>& voices();

    // Throws etude::Error for an unknown voice or a rate outside 8-192 kHz.
    std::unique_ptr<Stream> create_stream(const StreamOptions& options = {});

  private:
    std::shared_ptr<EngineCore> core_;
};

}  // namespace etude::engine
