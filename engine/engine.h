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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"
#include "engine/fault_plan.h"
#include "gpu/backend.h"

namespace etude::engine {

class StreamCore;
class EngineCore;

struct StreamOptions {
    std::string voice = "slt";     // "slt", "rms" or "awb"
    double sample_rate = 16000.0;  // output rate, 8000..192000 Hz
    // The latency the engine adds, from a block being produced to it being
    // played: the scheduler keeps this much audio ready ahead of pull(), and
    // every block's deadline follows from it. Fixed for the stream's life; a
    // consumer that pulls more than half of it at once raises it to twice its
    // pull size (see Stream::latency_ms()).
    double latency_ms = 100.0;
    double block_ms = 10.0;          // scheduling block, in whole 5 ms vocoder frames
    double cancel_fade_ms = 5.0;     // fade length when speech is cancelled
    bool render_ahead = true;        // let engine workers vocode later sentences early
    bool allow_reduced_tier = true;  // may the scheduler fall to the cheaper vocoder tier
    bool realtime_workers = true;    // SCHED_FIFO for the block processors where allowed
    FaultPlan primary_fault;         // test hooks: make a processor slow on purpose
    FaultPlan fallback_fault;
    // "mlsa": the exact CPU vocoder. "spectral": the frame-parallel vocoder,
    // on the device chosen by `backend`/`device` (see gpu/registry.h), with
    // the CPU processors as fallback.
    std::string vocoder = "mlsa";
    std::string backend = "auto";  // auto, cpu, cuda, opencl
    int device = -1;
    gpu::GpuFault gpu_fault;  // test hook: make the GPU fail, run out of memory, or be late
    // Spectral only: create_stream() waits (up to 60 s) until the device has
    // built its state and baked its FFT plans. Otherwise the CPU makes the
    // blocks until the device is ready, which for a cold OpenCL device can
    // take seconds.
    bool wait_for_device = false;
    // A neural vocoder (LEF file from tools/convert.py): makes this a mel
    // stream, fed by push_mel() instead of push_text(). `backend`/`device`
    // say where its GPU tier runs; the output rate is `sample_rate`.
    std::string model;
    // Optional: a cheaper model of the same family for the CPU tier (e.g.
    // HiFi-GAN V3 while V1 runs on the GPU); empty: `model` on the CPU too.
    std::string cpu_model;
    bool allow_phase_fallback = true;  // may the mel scheduler fall to phase reconstruction
};

// One scheduled block: who made it, at what tier, how long it took, and how
// much time was left before the audio callback needed it.
struct BlockRecord {
    enum Processor : std::uint8_t { Primary, Fallback, Ahead, Gpu };
    std::uint64_t index = 0;
    Processor processor = Primary;
    bool reduced_tier = false;
    bool fell_back = false;          // the first processor missed its cut-off
    std::int64_t dispatched_ns = 0;  // rt::now_ns() clock
    std::int64_t started_ns = 0;
    std::int64_t finished_ns = 0;
    std::int64_t deadline_ns = 0;
    double compute_ms() const { return static_cast<double>(finished_ns - started_ns) / 1e6; }
    double slack_ms() const { return static_cast<double>(deadline_ns - finished_ns) / 1e6; }
};

// Counters, read with relaxed atomics: each is exact, the set is a snapshot
// taken one field at a time.
struct StreamStats {
    std::uint64_t samples_delivered = 0;  // output samples handed out by pull()/read()
    std::uint64_t underruns = 0;          // pull() calls that had to pad speech with silence
    std::uint64_t underrun_samples = 0;   // samples of silence padded inside speech
    std::uint64_t sentences_queued = 0;
    std::uint64_t sentences_spoken = 0;
    std::uint64_t sentences_dropped = 0;  // not spoken: cancelled, or unspeakable (below)
    std::uint64_t sentences_unspeakable =
        0;                             // the front end made nothing of them (e.g. symbols only)
    std::uint64_t frames_vocoded = 0;  // 5 ms parameter frames turned into audio
    std::uint64_t cancels = 0;
    double first_audio_ms = -1.0;   // push_text() to first sample ready, last utterance
    double frontend_seconds = 0.0;  // time spent in text analysis
    double vocoder_seconds = 0.0;   // time spent in vocoding and resampling
    // Block scheduler.
    std::uint64_t blocks = 0;
    std::uint64_t blocks_primary = 0, blocks_fallback = 0, blocks_ahead = 0;
    std::uint64_t fallbacks = 0;    // blocks re-dispatched after a missed cut-off
    std::uint64_t late_blocks = 0;  // blocks finished after their deadline
    std::uint64_t reduced_tier_blocks = 0;
    std::uint64_t blocks_gpu = 0;
    double latency_ms = 0.0;         // the fixed latency in force
    std::string vocoder;             // "mlsa" or "spectral"
    std::string gpu_device;          // the GPU the spectral vocoder uses, if any
    std::string gpu_note;            // why none is used
    std::uint64_t gpu_failures = 0;  // device errors (each such block was remade on the CPU)
    bool gpu_disabled = false;       // off after repeated failures
    std::string gpu_last_error;
    std::uint64_t gpu_batches = 0;       // launches of the (shared) GPU processor
    std::uint64_t gpu_batched_jobs = 0;  // blocks they computed, all streams on the device
    std::int64_t gpu_largest_batch = 0;  // most blocks computed together
    bool realtime_workers = false;       // the OS granted SCHED_FIFO to the processors
    // Mel streams (push_mel): chunks made by each tier and frames vocoded.
    std::string model;  // architecture and file
    std::uint64_t mel_frames = 0;
    std::uint64_t mel_chunks_gpu = 0, mel_chunks_cpu = 0, mel_chunks_phase = 0;
    double model_latency_ms = 0;  // the network's added streaming latency
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

    // Mel streams only (StreamOptions::model): queues `frames` log-mel
    // frames laid out [n_mels][frames] as PyTorch holds them (a chunk from
    // an upstream acoustic model). `last` ends the utterance, so the
    // vocoder flushes the context it held back; push_mel({}, 0, true) ends it
    // without new frames. Throws etude::Error for a text stream or a chunk of
    // the wrong size or with NaN values.
    void push_mel(std::span<const float> mel, std::size_t frames, bool last = false);
    // Mel bands the model of a mel stream takes (0 for a text stream).
    std::size_t mel_bands() const;

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

    // Voice for text pushed from now on ("slt", "rms", "awb"); throws etude::Error.
    void set_voice(std::string_view voice);

    // True while text is queued or audio is not yet delivered.
    bool busy() const;
    // The fixed latency the engine adds (see StreamOptions::latency_ms).
    double latency_ms() const;
    // The most recent block records (at most `max`), oldest first.
    std::vector<BlockRecord> block_records(std::size_t max = 1 << 16) const;
    // Writes the block records as a Chrome trace (JSON; opens in Perfetto
    // or chrome://tracing). Throws etude::Error if the file cannot be written.
    void write_trace(const std::string& path) const;
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
