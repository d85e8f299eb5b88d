// A stream's voice behind one interface. A stream speaks with a built-in
// voice (Flite's front end, the MLSA or spectral vocoder), a Piper voice
// (espeak-ng, then VITS), or vocodes someone else's mel frames. StreamCore
// keeps what they all share (the text input, the queues, marks and word
// timings, the producer loop, the ring) and asks its StreamVoice for the
// steps that differ:
//
//   split    released text into sentences   the pushing thread
//   analyse  one sentence into its work item an engine front end, one at a
//                                            time per stream
//   begin,   one work item into the ring,    the stream's producer thread
//   step     a unit at a time
//
// Each writes through the VoiceSink its stream lends it. The voices:
// FliteStreamVoice (flite_stream_voice.h), PiperStreamVoice
// (piper_stream_voice.h) and MelStreamVoice (mel_stream_voice.h); the last
// two decode chunks through one MelScheduler (DecoderVoice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduling/block_sink.h"
#include "engine/scheduling/deadline_gate.h"
#include "engine/streams/sentence_accumulator.h"
#include "engine/streams/work_items.h"
#include "gpu/backend.h"

namespace etude::engine {

class BlockRecorder;
class EngineWorkers;
class FliteVoice;
class PiperVoice;
class PlaybackRing;
struct FaultSpec;

/// What a stream lends its voice's executor: the ring's writes (BlockSink)
/// and the stream's bookkeeping of words and refusals. Producer thread only.
class VoiceSink : public BlockSink {
  public:
    /// A word heard `offset` samples after ring position `start`: its mark
    /// goes into the stream's mark queue as the audio it starts in is written.
    virtual void plan_word(std::string_view text, std::uint64_t start, double offset,
                           std::uint64_t generation) = 0;
    /// The rest of a sentence could not be made (StreamStats::unspeakable_reason).
    virtual void note_unspeakable(std::string reason) = 0;
    /// A sentence whose words were wanted and could not be paired.
    virtual void note_words_unpaired() = 0;
    /// Waits for the stream's turn at the engine's DeadlineGate for one unit
    /// of neural work of `origin`'s speech (the order across streams,
    /// deadline.h). Empty when that speech is cancelled or the stream
    /// closes meanwhile. Give it back before writing the unit's audio.
    virtual DeadlineGate::Turn wait_turn(const ItemOrigin& origin) = 0;
    /// The stream is read offline (read()) and its producer has stepped
    /// down below the streams someone hears, or it is of the offline
    /// scheduling class: its work batches with other such work only, never
    /// leading a batch that holds theirs (Batching, models/vocoder_network.h).
    virtual bool read_offline() const = 0;
};

/// What one step of speaking a work item did (StreamVoice::step()).
struct Spoken {
    bool more = false;             // units of the item are left: step() again
    bool complete = false;         // (at its last step) all of it went into the ring
    double compute_seconds = 0.0;  // this step's vocoder time (StreamStats::vocoder_seconds)
};

class StreamVoice {
  public:
    virtual ~StreamVoice() = default;

    // ---- what the stream is -------------------------------------------------
    virtual const std::string& name() const = 0;
    /// StreamStats::vocoder: "mlsa", "spectral", "neural" or "vits".
    virtual const char* vocoder() const = 0;
    /// The mel bands push_mel() takes; 0 for a voice that speaks text.
    virtual std::size_t mel_bands() const { return 0; }
    bool speaks_text() const { return mel_bands() == 0; }
    /// The text input this voice's text goes through.
    virtual SentenceAccumulator make_input() const { return SentenceAccumulator(); }
    /// The producer thread runs at the block processors' priority.
    virtual bool producer_realtime() const = 0;

    // ---- intake, on the pushing thread ---------------------------------------
    /// Hands released text's sentences to `queue` (words: each sentence's
    /// written words are wanted), in groups as soon as each is ready; a
    /// later group of the same text is `continuing`.
    using QueueSentences = std::function<void(std::vector<Sentence>, bool continuing)>;
    virtual void split(std::string_view text, bool words, const QueueSentences& queue) = 0;
    /// push_phoneme_ids(): the ids, checked against the voice. Only a
    /// Piper voice takes them.
    virtual std::vector<std::int64_t> check_ids(std::span<const std::int64_t> ids) const;
    /// set_voice(): later text is spoken by the built-in voice `name`.
    /// Only a built-in voice's stream changes voice.
    virtual void set_voice(std::string_view name);

    // ---- analysis, on an engine worker ----------------------------------------
    /// The sentence's work item, or nothing (nothing to say, or refused:
    /// `refusal` says why, if the voice knows).
    virtual std::optional<WorkItem> analyse(Sentence& sentence, std::string& refusal) = 0;
    /// Its analyses run one at a time across all streams (a front end with
    /// process-wide state behind one lock, Flite's): the engine's front ends
    /// then take such a sentence only while no other such sentence is
    /// being analysed (other voices' go on beside it), rather than hold
    /// turns while they wait for the lock.
    virtual bool analyses_one_at_a_time() const { return false; }
    /// While the first audio of a push is being made, the next sentence's
    /// analysis waits (its work would take the cores the first audio needs).
    virtual bool holds_analysis_until_first_audio() const { return false; }
    /// Engine render workers may make this voice's analysed sentences ahead.
    virtual bool renders_ahead() const { return false; }
    /// The samples at the stream's rate a work item of this voice will
    /// write, as far as is known (a Piper prior's first durations only): the
    /// order across streams (deadline.h) counts queued audio with it.
    virtual std::uint64_t estimated_samples(const WorkItem& item) const = 0;

    // ---- the executor, on the producer thread --------------------------------
    /// Starts speaking one work item (not a marker) into the ring; each
    /// step() then speaks its next unit, until one says none is left. The
    /// caller keeps the item alive until then. Where the voice is between
    /// units is data of its own, not a thread's stack, so whoever calls
    /// step() decides when (and on which thread) the next unit runs: today
    /// the stream's producer, one step after another. A Piper sentence's
    /// unit is a chunk (its durations, flow and decoder); a built-in
    /// voice's sentence (block by block inside) and a mel push are one unit.
    virtual void begin(WorkItem& item) = 0;
    virtual Spoken step() = 0;
    /// No step of this voice waits for anything but a turn at the CPU's
    /// gate: no device push, no render worker, no more audio than a chunk
    /// into the ring. Such a voice's network streams are stepped on the
    /// engine's pool (scheduling/step_pool.h) instead of a thread each.
    virtual bool steps_on_a_pool() const { return false; }
    /// Drops the utterance in progress (a cancel was acknowledged).
    virtual void reset() {}
    /// StreamOptions::wait_for_device: returns once the device is up or off.
    virtual void wait_for_device() {}
    /// The stream is closing: executors stop waiting (before the producer is joined).
    virtual void stop() {}
    virtual void fill_stats(StreamStats& stats) const = 0;
    virtual std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> kernel_timings()
        const {
        return {};
    }
};

/// BuiltinVoiceOptions::length_scale, 1 if unset: a built-in voice's pace
/// is Flite's duration stretch, bounded since every frame it asks for is
/// made and kept until spoken. Throws etude::Error naming `voice` outside
/// 0.1..10.
float checked_length_scale(std::optional<float> length_scale, const std::string& voice);

/// The voice of a stream made with `options`: a Piper voice when `piper`
/// is set, mel frames when options.voice holds MelVoiceOptions, else the
/// built-in `voice`.
/// Throws etude::Error for options the voice refuses.
std::unique_ptr<StreamVoice> make_stream_voice(EngineWorkers& workers, const StreamOptions& options,
                                               const FaultSpec& faults, const FliteVoice& voice,
                                               std::shared_ptr<const PiperVoice> piper,
                                               const PlaybackRing& ring, VoiceSink& sink,
                                               BlockRecorder& records);

}  // namespace etude::engine
