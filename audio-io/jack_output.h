// A JACK client with one mono output port fed by an engine Stream.
//
// Ownership: JackOutput owns the jack_client_t (closed in the destructor)
// and the Stream it plays; the Engine must outlive it.
// Threads: JACK's process thread only calls Stream::pull() and reads clocks
// (real-time safe, proven by tests/audio-io/jack_test.cpp); buffer-size,
// sample-rate, xrun, latency and shutdown callbacks only set atomics. The
// owner's thread (any non-real-time thread) pushes text and polls state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "rt/counters.h"

typedef struct _jack_client jack_client_t;
typedef struct _jack_port jack_port_t;

namespace etude::audio_io {

struct JackOptions {
    std::string client_name = "etude";
    std::string server_name;       // empty: the default server ($JACK_DEFAULT_SERVER or "default")
    engine::StreamOptions stream;  // sample_rate is replaced by the server's rate
};

// Callback durations, bucketed by microsecond (the last bucket collects the rest).
class DurationHistogram {
  public:
    static constexpr std::size_t kBuckets = 20000;
    void add(std::int64_t ns) noexcept;
    std::uint64_t count() const;
    double percentile_us(double p) const;  // non-real-time
    double max_us() const { return static_cast<double>(max_ns_.get()) / 1000.0; }

  private:
    std::unique_ptr<std::atomic<std::uint32_t>[]> buckets_ {
        new std::atomic<std::uint32_t>[ kBuckets ]()
    };
    rt::Counter count_;
    rt::MaxGauge max_ns_;
};

class JackOutput {
  public:
    // Opens the client without starting a server; throws etude::Error with a
    // clear message if no server runs or the client cannot be created.
    JackOutput(engine::Engine& engine, JackOptions options);
    ~JackOutput();
    JackOutput(const JackOutput&) = delete;
    JackOutput& operator=(const JackOutput&) = delete;

    void activate();
    // Connects `out` to a port, or with "system" to the physical playback
    // ports; throws etude::Error naming the port if it does not exist.
    void connect(const std::string& destination);

    engine::Stream& stream() { return *stream_; }
    std::string port_name() const;
    std::uint32_t sample_rate() const { return rate_.load(); }
    std::uint32_t buffer_size() const { return buffer_size_.load(); }
    std::uint64_t xruns() const { return xruns_.get(); }
    std::uint64_t callbacks() const { return callbacks_.get(); }
    bool server_gone() const { return shutdown_.load(); }
    const std::string& shutdown_reason() const { return shutdown_reason_; }
    // Set when the server's sample rate no longer matches the stream's; the
    // owner then calls recreate_stream() from its own thread.
    bool rate_changed() const {
        return rate_.load() != static_cast<std::uint32_t>(stream_->sample_rate());
    }
    // Replaces the stream with one at the server's current rate (the old
    // stream's queued speech is cancelled; the caller re-queues what it needs).
    void recreate_stream();
    const DurationHistogram& callback_durations() const { return durations_; }
    // JACK's process thread for this client (for tests that watch it).
    unsigned long process_thread() const;
    // The engine latency reported on the port, in frames.
    std::uint32_t reported_latency_frames() const;

  private:
    static int on_process(std::uint32_t nframes, void* self);
    static int on_buffer_size(std::uint32_t nframes, void* self);
    static int on_sample_rate(std::uint32_t rate, void* self);
    static int on_xrun(void* self);
    static void on_latency(int mode, void* self);
    static void on_shutdown(int code, const char* reason, void* self);

    engine::Engine& engine_;
    JackOptions options_;
    jack_client_t* client_ = nullptr;
    jack_port_t* port_ = nullptr;
    std::unique_ptr<engine::Stream> stream_;
    std::atomic<engine::Stream*> live_{nullptr};  // what the process callback pulls from
    std::atomic<std::uint32_t> rate_{0}, buffer_size_{0};
    std::atomic<bool> shutdown_{false};
    std::string shutdown_reason_;
    rt::Counter xruns_, callbacks_;
    DurationHistogram durations_;
};

}  // namespace etude::audio_io
