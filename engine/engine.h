/// \file
/// The C++ API: an Engine loads voices and owns the workers; a Stream takes
/// text (or mel frames) and hands out audio at the rate its owner asked for.
///
/// Threads:
///  * Engine and Stream methods may be called from any non-real-time thread.
///  * Stream::pull() is the real-time entry point: call it from exactly one
///    thread (the audio callback). It never allocates, locks, blocks or does
///    I/O, and never throws; it reports problems through stats() counters.
///  * Stream::read() is pull()'s blocking sibling for offline consumers (files,
///    pipes); use one or the other on a stream, not both at once.
///
/// Errors: the other calls throw etude::Error (engine/error.h) naming what was
/// wrong. docs/api.md gives the overview, lifetimes and examples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/devices.h"
#include "engine/error.h"
#include "engine/ssml_prosody.h"
#include "engine/stream_options.h"

/** \class etude::Error
 * What the C++ API throws: a std::runtime_error whose message names the file,
 * option or value at fault. Never thrown by Stream::pull(), which reports
 * through StreamStats counters only. The C API turns it into a status code and
 * etude_last_error(). */

/// The speech engine: Engine, Stream and the types they take and return.
namespace etude::engine {

class StreamCore;
class EngineWorkers;
class PiperVoice;

/// A voice and its facts: a built-in voice, or a Piper voice as its files
/// describe it. The one description of a voice that every front end (the
/// CLI, the servers, the speech-dispatcher module, Python) lists and offers
/// (Engine::list_voices(), Engine::find_voice(), Engine::describe_voice()).
struct VoiceInfo {
    /// What speaks the voice.
    enum class Kind : std::uint8_t {
        Builtin,  ///< Flite's front end and LibEtude's vocoder (BuiltinVoiceOptions::voice)
        Piper     ///< a Piper (VITS) voice's files (PiperVoiceOptions::piper_voice)
    };
    Kind kind = Kind::Piper;  ///< which of the two
    std::string name;         ///< "en_US-joe-medium", "slt"
    std::string model_path;   ///< the .onnx; empty for a built-in voice
    /// "en_US": a Piper voice's language code, else its espeak-ng voice,
    /// else its name up to the first '_'.
    std::string language;
    /// "x_low", "low", "medium", "high" or "unknown"; "builtin" for a
    /// built-in voice.
    std::string quality;
    int sample_rate = 0;  ///< the voice's own rate in Hz
    /// Every speaker's name, by id (a number where the voice names none;
    /// "0" for a single-speaker or built-in voice).
    std::vector<std::string> speakers;
    /// Who speaks, for people: "US English female"; a Piper voice: its
    /// language in English, "English (United States)" (its espeak-ng voice
    /// where its config names no language).
    std::string description;
    /// The recordings the voice was made from: "CMU ARCTIC slt"; a Piper
    /// voice's config's dataset (may be empty).
    std::string dataset;
    std::string attribution_name;  ///< who made it: "CMU Flite / CMU ARCTIC", "rhasspy"
    std::string attribution_url;   ///< where it comes from
    std::string version;           ///< "flite-2.2"; a Piper voice's piper_version, or "1.0.0"
    /// The pace of speed 1.0: a Piper voice's config's length_scale; 1 for
    /// a built-in voice (Flite's duration stretch).
    float length_scale = 1.0f;
    /// Why the voice cannot be used (Engine::list_voices(): a config that
    /// cannot be read, then only kind, name and model_path are set); empty
    /// when it can.
    std::string problem;
};

/// The quality a block or mel chunk was made at.
enum class Quality : std::uint8_t {
    Full,                ///< the stream's vocoder or model, exact
    Reduced,             ///< the cheaper MLSA tier (StreamOptions::allow_reduced_tier)
    PhaseReconstruction  ///< mel streams: phase reconstruction from the mel, no network
};

/// One scheduled block: who made it, at what quality, how long it took, and
/// how much time was left before the audio callback needed it.
struct BlockRecord {
    /// Who made the block.
    enum Processor : std::uint8_t {
        Primary,   ///< the stream's first CPU processor (mel streams: the CPU)
        Fallback,  ///< the second CPU processor, after the first missed its cut-off
        Ahead,     ///< copied from a sentence a render worker vocoded ahead of time
        Gpu        ///< the device processor of the spectral vocoder
    };
    std::uint64_t index = 0;          ///< block number within the stream, from 0
    Processor processor = Primary;    ///< who made it
    Quality quality = Quality::Full;  ///< at what quality
    /// Made at less than full quality (quality != Quality::Full).
    bool reduced_tier = false;
    bool fell_back = false;          ///< the first processor missed its cut-off
    std::int64_t dispatched_ns = 0;  ///< handed to a processor (rt::now_ns() clock)
    std::int64_t started_ns = 0;     ///< the processor began it
    std::int64_t finished_ns = 0;    ///< its audio was ready
    std::int64_t deadline_ns = 0;    ///< when pull() needed it
    /// A neural chunk of a stream with real-time workers waits for its turn
    /// among all streams' work (Engine::Options::work_turns): when it asked
    /// for one and when it was granted it (0: it took none).
    std::int64_t turn_asked_ns = 0;
    std::int64_t turn_granted_ns = 0;  ///< (see turn_asked_ns)
    /// Time the processor spent on the block, in milliseconds.
    double compute_ms() const { return static_cast<double>(finished_ns - started_ns) / 1e6; }
    /// Time left between the block being ready and its deadline (negative: late).
    double slack_ms() const { return static_cast<double>(deadline_ns - finished_ns) / 1e6; }
};

/// A mark in a stream's speech (Stream::push_ssml, Stream::next_mark): an
/// SSML mark, or a word's start once Stream::report_words() asked for them.
struct SpeechMark {
    /// What reached this point of the speech.
    enum Kind : std::uint8_t {
        Named = 0,  ///< an SSML `<mark>` (Stream::push_mark); `name` is its name
        Word = 1,   ///< a written word starts; `name` is the word (cut at 63 bytes)
    };
    static constexpr std::size_t kMaxName = 63;  ///< bytes of a name, at most
    char name[kMaxName + 1] = {};                ///< NUL-terminated
    Kind kind = Named;                           ///< an SSML mark or a word
    std::uint64_t sample = 0;  ///< stream position where it is heard (Stream::position())
};

/// Counters, read with relaxed atomics: each is exact, the set is a snapshot
/// taken one field at a time.
struct StreamStats {
    std::uint64_t samples_delivered = 0;  ///< output samples handed out by pull()/read()
    std::uint64_t underruns = 0;          ///< pull() calls that had to pad speech with silence
    std::uint64_t underrun_samples = 0;   ///< samples of silence padded inside speech
    std::uint64_t sentences_queued = 0;   ///< sentences push_text() has queued
    std::uint64_t sentences_spoken = 0;   ///< sentences whose audio was delivered in full
    std::uint64_t sentences_dropped = 0;  ///< not spoken: cancelled, or unspeakable (below)
    /// The front end made nothing of them (e.g. symbols only).
    std::uint64_t sentences_unspeakable = 0;
    /// Why the last unspeakable sentence was refused, when the voice's
    /// network refused it (e.g. "VITS: the durations add up to ... frames");
    /// empty when the front end simply found nothing to pronounce.
    std::string unspeakable_reason;
    std::uint64_t frames_vocoded = 0;  ///< 5 ms parameter frames turned into audio
    std::uint64_t cancels = 0;         ///< cancel() calls
    double first_audio_ms = -1.0;      ///< push_text() to first sample ready, last utterance
    double frontend_seconds = 0.0;     ///< time spent in text analysis
    double vocoder_seconds = 0.0;      ///< time spent in vocoding and resampling
    // Block scheduler.
    std::uint64_t blocks = 0;               ///< blocks scheduled
    std::uint64_t blocks_primary = 0,       ///< blocks made by BlockRecord::Primary
        blocks_fallback = 0,                ///< blocks made by BlockRecord::Fallback
        blocks_ahead = 0;                   ///< blocks copied from BlockRecord::Ahead
    std::uint64_t fallbacks = 0;            ///< blocks re-dispatched after a missed cut-off
    std::uint64_t late_blocks = 0;          ///< blocks finished after their deadline
    std::uint64_t reduced_tier_blocks = 0;  ///< blocks made at less than full quality
    std::uint64_t blocks_gpu = 0;           ///< blocks made by BlockRecord::Gpu
    double latency_ms = 0.0;                ///< the fixed latency in force
    std::string vocoder;     ///< "mlsa", "spectral", "neural" (mel streams) or "vits" (Piper)
    std::string gpu_device;  ///< the GPU the spectral vocoder uses, if any
    std::string gpu_note;    ///< why none is used
    /// Device errors: each such block, chunk or flow push was remade on the CPU.
    std::uint64_t gpu_failures = 0;
    bool gpu_disabled = false;  ///< off after repeated failures
    /// The GPU holds its device state and takes work now: false while that
    /// state is built (the device's warm-up) or rebuilt after a device
    /// error (the CPU makes the blocks meanwhile), when it is off, and when
    /// the stream has no GPU.
    bool gpu_ready = false;
    std::string gpu_last_error;          ///< the last device error's message
    std::uint64_t gpu_batches = 0;       ///< launches of the (shared) GPU processor
    std::uint64_t gpu_batched_jobs = 0;  ///< blocks they computed, all streams on the device
    std::int64_t gpu_largest_batch = 0;  ///< most blocks computed together
    /// The OS granted SCHED_FIFO to the stream's processors (a built-in
    /// voice's) or its producer (a Piper voice's). A Piper stream read
    /// offline (read()) reports false once its producer has stepped down; a
    /// built-in voice's processors keep theirs.
    bool realtime_workers = false;
    // Mel streams (push_mel): chunks made by each tier and frames vocoded.
    std::string model;                 ///< architecture and file
    std::uint64_t mel_frames = 0;      ///< mel frames vocoded
    std::uint64_t mel_chunks_gpu = 0,  ///< chunks made by the model on the GPU
        mel_chunks_cpu = 0,            ///< chunks made by the model on the CPU
        mel_chunks_phase = 0;          ///< chunks made by phase reconstruction
    double model_latency_ms = 0;       ///< the network's added streaming latency
    // A Piper stream's flow (the latent's last network before the decoder):
    // it runs on the decoder's device (gpu_device) when the decoder has
    // one, the CPU covering any device error from the same point.
    std::uint64_t flow_pushes_gpu = 0,  ///< flow pushes (blocks of latent frames) run on the device
        flow_pushes_cpu = 0;            ///< flow pushes run on the CPU
    /// Of flow_pushes_gpu, those that ran in one batch with other streams'
    /// flow pushes (the streams of one voice, speaker and device, on a GPU:
    /// docs/backends.md).
    std::uint64_t flow_pushes_batched = 0;
    /// Sentences whose flow the CPU took over after a device error (the
    /// error also counts in gpu_failures): it reran the sentence's prior up
    /// to the frames the device had been given, then went on alone.
    std::uint64_t flow_takeovers = 0;
    // A Piper stream's text analysis (the text encoder and the duration
    // predictor): on the decoder's device (gpu_device) where the flow goes,
    // else on the host (no device, one too slow for the decoder, a device
    // error, which also counts in gpu_failures, or a near tie).
    std::uint64_t analyses_gpu = 0,  ///< sentences analysed on the device
        analyses_cpu = 0;            ///< sentences analysed on the host
    /// Of analyses_cpu, the sentences the device analysed whose durations
    /// lay within 2.5e-4 (relative) of a whole frame, or were not numbers:
    /// the host made them again, so their frame counts are the host's.
    std::uint64_t analyses_near_tie = 0;
    /// Of analyses_gpu, the sentences analysed in one batch with other
    /// streams' (one encoder call and one duration call for all of them:
    /// the streams of one voice and device, on a GPU, docs/backends.md).
    std::uint64_t analyses_batched = 0;
    std::uint64_t marks = 0;          ///< SSML marks and words reached (next_mark())
    std::uint64_t marks_dropped = 0;  ///< marks lost because 1,024 were not taken
    /// Sentences spoken without word marks (report_words() on) because the
    /// voice's front end could not pair written and spoken words.
    std::uint64_t words_unpaired = 0;
};

/// One voice speaking at one output rate: text (or mel frames) in, audio out.
/// Made by Engine::create_stream(); destroying it stops its work and joins
/// its thread, so stop the audio callback that pulls from it first.
class Stream {
  public:
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    /// Adds text to the stream's input, to be spoken after what is already
    /// queued. The text may come in pieces cut anywhere (a language model's
    /// tokens, even inside a word or a UTF-8 sequence): the input is split
    /// into sentences as the whole text would be, and the last sentence is
    /// held back until more text completes it or end_input() says the input
    /// has ended. So call end_input() after the last piece; until then
    /// read() waits for it, and busy() is true. Throws etude::Error for
    /// invalid UTF-8 (in the text received so far) or a mel stream. Returns
    /// the number of sentences this call queued (0 when the text only
    /// extends the held sentence; text with nothing speakable queues none).
    std::size_t push_text(std::string_view text);
    /// Ends the text input: the held sentence is queued (see push_text()).
    /// Text pushed afterwards starts a new input. Returns the number of
    /// sentences it queued. Throws etude::Error when the held text is not
    /// valid UTF-8 (a piece ended inside a character that never completed).
    std::size_t end_input();

    /// Adds an SSML document to the input (`<speak>`, `<mark name="..."/>`,
    /// `<break time="..."/>` or strength, `<say-as interpret-as="characters">`,
    /// entities; other elements keep their text; see engine/ssml_document.h):
    /// its text as push_text() takes text, each break as that much silence,
    /// and each mark as a SpeechMark that next_mark() hands out with the
    /// sample position where it is heard. A mark or break ends the sentence
    /// before it (its audio must be complete to place what follows). Text
    /// that is not well-formed XML is spoken as plain text with its marks
    /// and breaks kept where a lenient reading finds them. Throws
    /// etude::Error for invalid UTF-8, a mark name longer than
    /// SpeechMark::kMaxName bytes, or a mel stream; then nothing is queued.
    /// Call end_input() after the last document as after push_text().
    /// Returns the number of sentences queued.
    std::size_t push_ssml(std::string_view document);
    /// A mark after the input so far, as `<mark name="..."/>` in push_ssml()
    /// (it ends the sentence before it). Throws etude::Error for a name
    /// longer than SpeechMark::kMaxName bytes or a mel stream.
    void push_mark(std::string_view name);
    /// Silence after the input so far, as `<break time="..."/>` (it ends the
    /// sentence before it). Throws etude::Error outside 0..60000 ms or for a
    /// mel stream.
    void push_break(double ms);
    /// The text pushed from now on is spoken with `prosody`: its rate
    /// (0.1..10, times the voice's pace), pitch (0.5..2, times its F0;
    /// built-in voices only, a Piper voice has no pitch control) and volume
    /// (0..4, times its amplitude). It ends the sentence held before it, as
    /// a mark does. SSML's `<prosody>` in push_ssml() applies within it.
    /// Throws etude::Error for a value outside those ranges or a mel stream.
    void set_prosody(const Prosody& prosody);
    /// Real-time: the next mark reached by the stream's speech production,
    /// in order, or false when there is none yet. Never blocks or allocates.
    /// `mark.sample` is where in the stream's audio it is heard: compare it
    /// with position(). Marks of speech dropped by cancel() are skipped. The
    /// stream keeps the last 1,024 marks not yet taken (more are counted in
    /// StreamStats::marks_dropped).
    bool next_mark(SpeechMark& mark) noexcept;
    /// Also hand out each written word's start as a SpeechMark of kind Word,
    /// for the text pushed after it (off by default, so that a consumer that
    /// takes no marks does not fill the queue); each goes into the queue as
    /// the audio it starts in is made. Built-in voices name Flite's
    /// tokens; Piper voices pair the text's words with espeak-ng's spoken
    /// words, and speak a sentence where they cannot be paired without its
    /// word marks (StreamStats::words_unpaired). Mel streams have no words.
    void report_words(bool on) noexcept;
    /// Real-time, the consumer's thread: samples of the stream's audio
    /// consumed so far by pull() or read() (padding excluded; audio dropped
    /// by a cancel counts as consumed). A mark is heard when position()
    /// reaches its `sample`.
    std::uint64_t position() const noexcept;

    /// Mel streams only (MelVoiceOptions::model): queues `frames` log-mel
    /// frames laid out [n_mels][frames] as PyTorch holds them (a chunk from
    /// an upstream acoustic model). `last` ends the utterance, so the
    /// vocoder flushes the context it held back; push_mel({}, 0, true) ends it
    /// without new frames. Throws etude::Error for a text stream or a chunk of
    /// the wrong size or with NaN values.
    void push_mel(std::span<const float> mel, std::size_t frames, bool last = false);
    /// Piper streams only: queues one sentence given as the voice's phoneme
    /// ids (as `etude phonemize` prints them, laid out ^ _ (p _)* $). Throws
    /// etude::Error for another stream, no ids, or an id outside the voice's
    /// symbols.
    void push_phoneme_ids(std::span<const std::int64_t> ids);
    /// Mel bands the model of a mel stream takes (0 for a text stream).
    std::size_t mel_bands() const;

    /// Real-time: fills `out` with the next samples; pads with silence where
    /// none are ready (counted as an underrun while speech is in progress).
    /// Returns how many samples were real audio.
    std::size_t pull(std::span<float> out) noexcept;

    /// Blocking read for offline use: waits for audio, returns the number of
    /// samples written (less than out.size() only when speech has ended);
    /// returns 0 once everything queued has been delivered and no text is
    /// held back (see push_text()). A stream read this way has no real-time
    /// listener: its producer steps down from SCHED_FIFO to below normal
    /// work, behind the streams someone hears (docs/architecture.md). To
    /// feed a player, use pull() or read_some(), which keep it.
    std::size_t read(std::span<float> out);
    /// Streaming read for offline consumers that hand audio on as it is
    /// made (a network reply, a Python iterator): copies the audio that is
    /// ready, at most out.size() samples, waiting up to `timeout_ms` for
    /// some while audio is on its way (sentences queued or being spoken, or
    /// a cancel's fade). Returns 0 when none came in time, and at once when
    /// none is on its way: the stream is idle, or waits for its caller (text
    /// held back, an unfinished mel utterance); busy() tells these apart.
    /// Same thread rule as read().
    std::size_t read_some(std::span<float> out, int timeout_ms);
    /// For a reader on an event loop, which reads with read_some(out, 0)
    /// and never waits in it: `listener` is called, on the engine's
    /// threads, whenever audio may have become ready to read or the work
    /// on its way has ended (busy() may have turned false). It must be
    /// quick and must not call into the stream (ring the loop's wake). A
    /// reader clears its flag before it reads, so that a call in between
    /// is not lost. Replaces the listener before; an empty function removes
    /// it. Once this returns, and once the stream is destroyed, the old
    /// listener is never called again.
    void set_audio_listener(std::function<void()> listener);

    /// Stops speaking within one pull() with a short fade, and drops all
    /// queued and held text. Text pushed afterwards is spoken normally.
    void cancel();

    /// Voice for text pushed from now on ("slt", "rms", "awb"); throws etude::Error.
    void set_voice(std::string_view voice);

    /// True while text is queued or held back, or audio is not yet delivered.
    bool busy() const;
    /// The fixed latency the engine adds (see StreamOptions::latency_ms).
    double latency_ms() const;
    /// The most recent block records (at most `max`), oldest first.
    std::vector<BlockRecord> block_records(std::size_t max = 1 << 16) const;
    /// Writes the block records as a Chrome trace (JSON; opens in Perfetto
    /// or chrome://tracing). Throws etude::Error if the file cannot be written.
    void write_trace(const std::string& path) const;
    /// Throws etude::Error, as write_trace() would, when a trace cannot be
    /// written to `path` (it creates and removes the file's temporary): a
    /// program checks before it speaks rather than failing after.
    static void check_trace_path(const std::string& path);
    /// The output rate in Hz (StreamOptions::sample_rate).
    double sample_rate() const;
    /// The voice of the text pushed next (see set_voice()).
    const std::string& voice() const;
    /// A snapshot of the counters; cheap, callable while audio plays.
    StreamStats stats() const;

  private:
    friend class Engine;
    explicit Stream(std::shared_ptr<StreamCore> core);
    void check_process() const;
    std::shared_ptr<StreamCore> core_;
    std::uint64_t fork_generation_;  // the process it was made in (rt/fork_generation.h)
};

/// What an Engine's shared workers are and have done (Engine::stats()).
struct EngineStats {
    /// Units of audio work run at once across streams (Options::work_turns,
    /// resolved).
    int work_turns = 0;
    /// Network streams' decoder chunks run at once (Options::network_turns,
    /// resolved).
    int network_turns = 0;
    /// Threads analysing sentences (Flite's front end, a Piper voice's
    /// encoder and durations): one per turn less one, at least one.
    int front_end_threads = 0;
    /// The most sentences analysed at once so far (a live stream's each in
    /// its turn; an offline reader's and a server stream's take none).
    int most_analyses_at_once = 0;
    /// How many times the front-end threads have looked at a stream for a
    /// sentence to analyse, in all. They look only at the streams that
    /// have had new text or room for more since they last looked, so this
    /// grows with the sentences spoken, not with the streams that are open
    /// and idle.
    std::uint64_t front_end_looks = 0;
    /// How many times the render workers (made for the voices that render
    /// sentences ahead: the built-in ones) have looked at a stream for a
    /// sentence to render. Like front_end_looks, it grows with the
    /// sentences spoken, not with the streams open and idle.
    std::uint64_t render_looks = 0;
};

/// How many real-time streams this machine holds with a voice
/// (Engine::measure_capacity()). On the CPU the streams are spoken; where a
/// Piper voice's decoder and flow run on a device, the device's batch cost
/// is measured and the host's text analysis timed (the fields from
/// `device` on).
struct EngineCapacity {
    /// Seconds of speech made per second of wall time: by all the streams
    /// spoken together on the CPU; on a device, the smaller of what the
    /// device's planned batches and the host's analysis make.
    double speed = 0;
    /// How many streams spoke at once for the measurement (on a device: the
    /// host's threads analysing at once).
    int streams_measured = 0;
    /// Real-time streams to admit at once: realtime_streams_at(speed) on
    /// the CPU; on a device the smaller of device_streams and host_streams,
    /// at least 1.
    std::size_t streams = 0;
    /// The device whose batch cost was measured ("vulkan llvmpipe (...)");
    /// empty where the streams were spoken on the CPU.
    std::string device;
    /// Why the device the decoder would run on was not measured (its
    /// error): the figure is then the CPU's, spoken. Empty otherwise.
    std::string device_error;
    /// The device's cost of one batch of streams' decoder chunks with the
    /// flow's work for them: the decoder's chunks and the flow's pushes are
    /// each timed in batches of several sizes through their batched paths,
    /// each fitted, and the two added (the flow's launch times chunk_frames
    /// over its pushes' 48 frames). Nanoseconds per launch ...
    std::int64_t launch_ns = 0;
    /// ... and nanoseconds per latent frame of every chunk in the batch,
    /// the decoder's and the flow's together.
    double frame_ns = 0;
    /// Latent frames in each stream's chunk, the unit timed and planned.
    int chunk_frames = 0;
    /// Streams in the largest batch timed (of the decoder and of the flow
    /// both).
    int largest_batch_timed = 0;
    /// Streams in the batches planned: the largest, at most
    /// largest_batch_timed, that ends within four fifths of its chunks'
    /// audio.
    int batch_streams = 0;
    /// Real-time streams the device carries in those batches, a fifth of its
    /// time kept free.
    std::size_t device_streams = 0;
    /// Seconds of speech per second whose text the host analyses (espeak-ng,
    /// the encoder, the durations, the prior's sampling) on
    /// streams_measured threads at once: the part that stays on the host.
    double host_speed = 0;
    /// realtime_streams_at(host_speed).
    std::size_t host_streams = 0;
};

/// How soon each of several streams started together is heard
/// (Engine::measure_first_audio()): what a server that admits that many at
/// once can promise its clients.
struct FirstAudioMeasure {
    /// How many streams started together.
    int streams = 0;
    /// The median of their first audios, in milliseconds from their common
    /// start.
    double median_ms = 0;
    /// The last of their first audios (the promise), in milliseconds from
    /// their common start.
    double last_ms = 0;
};

/// The real-time streams to admit for an aggregate speed: that speed less
/// a fifth kept free (starts cost more than their real-time share and
/// come in bursts), at least 1.
std::size_t realtime_streams_at(double speed);

/// Loads voices and owns the workers that analyse text and vocode ahead; the
/// factory of streams. One is enough for a process: its streams share the
/// workers. Destroy the streams first: once the Engine is gone they take no
/// more text (push_text() throws). Threads do not survive fork(): in a
/// process forked after the Engine (or a Stream) was made, every call that
/// would wait for its threads throws etude::MadeBeforeFork instead, and
/// destroying them there frees nothing; make an Engine in the child
/// (docs/python.md, "Processes").
class Engine {
  public:
    /// What the Engine does at construction.
    struct Options {
        /// Voices loaded now rather than at their first use: built-in
        /// voices by name, and Piper voices (as PiperVoiceOptions::piper_voice),
        /// which the engine then keeps open for its life, so that a stream
        /// of one does not read its network again. (A Piper voice first
        /// opened by a stream is kept for the engine's life too: a program
        /// that opens a stream per utterance reads the voice once, as
        /// Piper's PiperVoice.load() is called once.) A Piper voice's default
        /// speaker is also made ready to stream (its flow and CPU decoder),
        /// so that the first stream starts as fast as later ones.
        std::vector<std::string> preload_voices{"slt"};
        /// The decoder backend the preloaded Piper voices' streams will ask
        /// for (as StreamOptions::backend): preloading finds and opens its
        /// device too. "cpu" opens none.
        std::string preload_backend = "auto";
        /// Their device index within that backend (as
        /// StreamOptions::device; -1: the best).
        int preload_device = -1;
        /// How many units of the work that makes audio (a sentence's
        /// analysis, a Piper or mel decoder chunk) of streams with real-time
        /// workers run at once, across all streams, taken earliest deadline
        /// first (docs/architecture.md, "The order across streams"). 0: one
        /// less than the CPUs this process may use (its affinity: taskset,
        /// a container's cpuset), at least 1, which
        /// leaves a core for the threads that push text and serve clients.
        /// It also sets the front-end threads: one per turn less one (that
        /// turn is kept for decoder chunks), at least one.
        int work_turns = 0;
        /// How many decoder chunks of network streams
        /// (SchedulingClass::Network: a server's) run at once, taken
        /// earliest deadline first among them at their own threads'
        /// priority. 0: as many as the CPUs this process may use, at least 2.
        int network_turns = 0;
        /// Time every operation on every device and the CPU backend, for
        /// Stream::write_trace()'s kernel rows and `etude say --stats`'
        /// kernel table. Off by default: timing brackets each operation
        /// (events, timestamp queries, a lock), which costs most where the
        /// operations are many and small. Process-wide, like the devices.
        bool profile_kernels = false;
        /// The arithmetic of the devices' matrix products and convolutions
        /// (set_device_precision(), engine/devices.h): Fp32, the default,
        /// keeps every device within the parity bounds of the CPU; Tf32
        /// asks a CUDA device for its tensor cores. Process-wide, like the
        /// devices; left as it is when Fp32.
        DevicePrecision device_precision = DevicePrecision::Fp32;
    };
    /// Starts the workers and loads the default voice, "slt".
    Engine();
    /// Starts the workers and loads `options.preload_voices`; throws
    /// etude::Error for an unknown voice.
    explicit Engine(Options options);
    /// Stops the workers; streams still alive can no longer take text.
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    /// Hands the memory the process has freed back to the system now
    /// (malloc_trim), as the engine does itself when its last stream ends.
    /// For a host whose own threads free memory after that (a server's
    /// synthesis threads ending), so that an idle process keeps only what
    /// it uses. Takes a few ms; any thread, never an audio callback.
    static void give_back_free_memory();

    /// Loads `voice` now, as Options::preload_voices does (a built-in name
    /// or a Piper voice), and keeps it for the engine's life. Throws
    /// etude::Error for an unknown or malformed voice. Any thread.
    void preload_voice(const std::string& voice);

    /// Where espeak-ng, which turns Piper voices' text into phonemes, reads
    /// its data: `folder` is an espeak-ng-data folder (phontab is in it).
    /// Without this call espeak-ng searches as it always does
    /// (ESPEAK_DATA_PATH, ~/espeak-ng-data, then the folder built into the
    /// library). The Python wheel names the copy it carries, which matches
    /// the espeak-ng library inside it, unless ESPEAK_DATA_PATH is set
    /// (docs/python.md). Process-wide, as espeak-ng's state is: call it
    /// before the first Piper voice loads. Throws etude::Error when `folder`
    /// holds no phontab, when espeak-ng has already started on other data,
    /// or in a build without espeak-ng.
    static void set_espeak_data(const std::string& folder);

    /// The embedded voices: "slt", "rms", "awb".
    static const std::vector<std::string>& voices();

    /// The Piper voice `name_or_path` names (see PiperVoiceOptions::piper_voice),
    /// read from its files. Throws etude::Error naming the file and field.
    static VoiceInfo describe_voice(const std::string& name_or_path);

    /// Every voice: the built-in ones ("slt" first, the default), then the
    /// Piper voices in the voice folders (as installed_voices() finds them),
    /// each described from its config alone: a voice whose config cannot be
    /// read is listed with VoiceInfo::problem saying why, and front ends
    /// leave it out. describe_voice() also checks a voice's network.
    static std::vector<VoiceInfo> list_voices();

    /// The voice `name_or_path` names: a built-in name, a Piper voice's path
    /// (PATH/VOICE.onnx or its .onnx.json), or a Piper voice's name in the
    /// voice folders; described as list_voices() does. std::nullopt when
    /// there is no such voice; throws etude::Error, naming the file, for a
    /// path without a config beside it or a config that cannot be read.
    static std::optional<VoiceInfo> find_voice(const std::string& name_or_path);

    /// The folders searched for Piper voices by name, in order, existing or
    /// not: each of ETUDE_VOICE_PATH (colon-separated), then
    /// $XDG_DATA_HOME/libetude/voices (~/.local/share/libetude/voices).
    static std::vector<std::string> voice_folders();

    /// The Piper voices installed in the voice folders (ETUDE_VOICE_PATH,
    /// then the per-user folder; docs/voices.md), as the paths of their
    /// .onnx files, in folder order (a name in two folders: the first's).
    /// Each may be described with describe_voice(), which throws for one
    /// whose files are malformed; front ends list voices with these two.
    static std::vector<std::string> installed_voices();

    /// A new stream with `options`. Throws etude::Error for an unknown voice,
    /// a rate outside 8-192 kHz, a latency or block length out of range, or a
    /// model file that cannot be loaded. A Piper voice it opens stays open
    /// for the engine's life (Options::preload_voices).
    std::unique_ptr<Stream> create_stream(const StreamOptions& options = {});

    /// The shared workers' counts. Any thread.
    EngineStats stats() const;

    /// Measures how many real-time streams this machine holds with the
    /// voice of `options`: `at_once` streams (1 to 32; 0: one per CPU this
    /// process may use, 2 to 32) each speak a typical two-sentence
    /// assistant reply, read as a server reads it (read_some()), and their
    /// aggregate speed, less a fifth, is the answer.
    /// Where a Piper voice's decoder runs on a device (a GPU, or a device
    /// named by `options.backend`), nothing is spoken: batches of 1, 2, 4,
    /// ... up to 32 streams' decoder chunks and flow pushes are timed
    /// through the device's batched paths (within about a second), its
    /// launch cost and cost per frame fitted and the real-time streams it
    /// carries derived; `at_once` threads time the host's text analysis of
    /// the reply; the answer is the smaller of the two. A device that fails
    /// meanwhile leaves the answer to the CPU, spoken
    /// (EngineCapacity::device_error says why). Takes about a second for a
    /// Piper medium voice; loads the voice if it is not yet. A server
    /// admits that many syntheses at once (`etude serve` does). Throws
    /// etude::Error when the voice cannot speak or `at_once` is outside 0
    /// to 32.
    EngineCapacity measure_capacity(const StreamOptions& options = {}, int at_once = 0);
    /// Measures how soon each of `streams` streams (1 to 64) with `options`
    /// is heard when all start at once: each speaks the same typical reply,
    /// read as a server reads it (read_some(), audio handed on as it is
    /// made), and the time from the common start to each one's first audio
    /// is taken; once all have been heard, all stop. With `streams` the
    /// capacity measured above, the last of them is the first audio a
    /// server that admits that many can promise (`etude serve` logs it).
    /// Takes about as long as that last first audio. Throws etude::Error
    /// when the voice cannot speak or `streams` is outside 1 to 64.
    FirstAudioMeasure measure_first_audio(const StreamOptions& options, int streams);
    /// The most streams measure_first_audio() starts together: a server's
    /// most admitted by default (`etude serve`), and each stream has
    /// threads of its own.
    static constexpr int kMostStartedTogether = 64;

  private:
    void check_process() const;
    std::uint64_t fork_generation_;  // the process it was made in (rt/fork_generation.h)
    std::shared_ptr<EngineWorkers> core_;
    std::string preload_backend_;
    int preload_device_;
    // Keeps a Piper voice open for the engine's life (once).
    void keep_voice(const std::shared_ptr<const PiperVoice>& voice);
    std::mutex piper_voices_mu_;  // guards piper_voices_ and gpu_tier_preloaded_
    // Preloaded, and every voice a stream has opened: read once per engine.
    std::vector<std::shared_ptr<const PiperVoice>> piper_voices_;
    bool gpu_tier_preloaded_ = false;  // preload_voice() has opened the device
};

}  // namespace etude::engine
