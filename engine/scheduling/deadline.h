// The scheduling policy's deadline, one function for every kind of stream
// (text blocks, audio copied ahead, mel chunks): when will the consumer
// need the first sample of the audio about to be made?
//
//  * Before playback starts the consumer waits for the fixed latency's worth
//    of audio (PlaybackRing::pull's prebuffer), so new audio is needed no
//    sooner than that, or than what is already buffered if that is more.
//  * Once it plays, what the ring holds is all the time there is. (Taking
//    the latency then as well gave every block the same deadline however
//    little was buffered: right after a fallback that only just made it the
//    ring holds one block, and the next slow block was cut off too late to
//    be covered. Fixed for text in 3d16001; mel chunks now share it.)
//  * An offline reader (read()) is a consumer whose playback never starts:
//    its deadline is the latency budget, as before playback, so a late or
//    failed device is still covered by the CPU. But nobody hears a late
//    block, so quality is never traded for time: may_reduce_quality() is
//    false and the schedulers offer no Reduced or PhaseReconstruction
//    candidate. (Before, mel chunks had no deadline offline and text blocks
//    could fall to the reduced tier.)
//  * Less one consumer period: a consumer takes its period's samples in one
//    pull, at the start of the period.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace etude::engine {

// What the deadline depends on, sampled from the PlaybackRing.
struct PlaybackState {
    double rate = 0;              // samples per second
    std::size_t buffered = 0;     // samples in the ring, not yet pulled
    std::size_t prebuffer = 0;    // what pull() waits for before playback starts
    std::size_t pull_period = 0;  // the consumer's largest pull so far
    bool playing = false;         // the consumer is past its prebuffer
    bool live_consumer = false;   // pull() has been called (not only read())
};

inline std::int64_t deadline_ns(std::int64_t now_ns, const PlaybackState& s) {
    const std::size_t ahead = s.playing ? s.buffered : std::max(s.buffered, s.prebuffer);
    const std::size_t usable = ahead > s.pull_period ? ahead - s.pull_period : 0;
    return now_ns + static_cast<std::int64_t>(static_cast<double>(usable) / s.rate * 1e9);
}

// Whether candidates below full quality may be offered: only to a live
// consumer, who would hear a late block.
inline bool may_reduce_quality(const PlaybackState& s) {
    return s.live_consumer;
}

// Whether a chunk goes to a GPU whenever the GPU may take it, rather than to
// the processor its deadline prices quickest. A stream read offline (read())
// has no listener to be late for: what counts is the audio all streams get
// per second, and a GPU's batches make more of it than chunks spread over
// the host's cores, which must feed the GPU as well. The deadline's price is
// a chunk's latency, which a loaded device's queue inflates while its
// throughput grows: on an H200 with 16 host cores, 256 offline streams made
// 132x with the CPU taking about 80% of the chunks, priced quicker, and
// 301x with every chunk on the device (docs/benchmarks.md, 2026-11-30). Not
// for a device that is no GPU (lavapipe, PoCL): it runs on the host's cores,
// which the CPU tier would use as well. Nor for a GPU that the stream's
// calibration found slower than the CPU for a chunk alone, unloaded (an
// integrated GPU, as a small board's may be): there the price decides.
// The CPU still covers a device's errors.
inline bool device_first(bool read_offline, bool device_is_gpu, bool device_was_quicker) {
    return read_offline && device_is_gpu && device_was_quicker;
}

// How long a chunk's push to a device may wait for other streams' pushes to
// join its batch (models/stream_joiner.h): half of what its deadline leaves
// beyond the device's expected time for it, and no more than
// kJoinWaitCapNs; 0 (no wait) when nothing is left. Half, because the wait
// shares the slack with what the batch then adds (the joined streams' work
// beside its own). The cap is about a Piper chunk's period (32 frames,
// 371 ms of audio): live producers are paced by their rings, so a stream's
// phase is where its listener started, and an early stream must wait up to
// a period for the latest one; a shorter cap leaves streams further apart
// than it never meeting (50 ms: 4 live streams' decoder pushes 1.1 a batch
// on PoCL, against 3.2 with this cap; docs/benchmarks.md). A stream that
// waits keeps that much less audio ahead, within its slack.
constexpr std::int64_t kJoinWaitCapNs = 400'000'000;
// Whether a chunk may wait at all: not before a live listener's first audio
// (the latency users measure; a new stream's chunk would wait for streams
// mid-sentence, whose next pushes may be a chunk's period away), but once
// it plays, and for an offline reader, whose playback never starts.
inline bool may_wait_to_join(const PlaybackState& s) {
    return !s.live_consumer || s.playing;
}
inline std::int64_t join_wait_until_ns(std::int64_t now_ns, std::int64_t deadline_ns,
                                       std::int64_t expected_ns) {
    const std::int64_t spare = deadline_ns - now_ns - std::max<std::int64_t>(expected_ns, 0);
    if (spare <= 0) return 0;
    return now_ns + std::min(spare / 2, kJoinWaitCapNs);
}

// ---- The order across streams ----------------------------------------------
// The engine's front ends take the sentence to analyse next from all its
// streams earliest deadline first (EngineWorkers). A sentence's deadline is
// when its stream's listener would run out of audio without it:
//
//  * A stream that has not started (no audio of its push written yet): its
//    push plus the first-audio target, plus the audio queued before the
//    sentence. Every new stream gets the same target, so new streams are
//    served in the order they came, and before any started stream that has
//    more than the target plus the lead still to play.
//  * A started stream: on a listener clock that starts at its first audio,
//    the end of the audio made and queued so far, less the lead a sentence
//    needs to be analysed and its first audio made on a loaded machine. A
//    live consumer plays from about then; an offline reader (read()) counts
//    as a listener starting then too, so one that reads far ahead of real
//    time waits for the streams someone is listening to.
//
// The order is between streams only: a stream's own sentences stay in order.
struct StreamHorizon {
    bool started = false;
    std::int64_t pushed_ns = 0;          // not started: when the sentence was pushed
    std::int64_t listener_start_ns = 0;  // started: when its first audio was written
    // Started: audio made and queued since the listener's start. Not
    // started: audio queued before the sentence. Seconds, estimated.
    double audio_s = 0.0;
};

// The order's clock: steady-clock nanoseconds.
inline std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// First audio within this of a push is the goal the order serves.
constexpr std::int64_t kFirstAudioTargetNs = 200'000'000;
// What a started stream's next sentence needs before it is heard: queueing
// behind other analyses, its own, and its first chunk, with both cores busy.
constexpr std::int64_t kSentenceLeadNs = 500'000'000;

// When the work that continues a stream past its horizon is due: `lead`
// before its listener reaches it, or for a stream that has not started,
// the first-audio target after its push.
inline std::int64_t horizon_deadline_ns(const StreamHorizon& h, std::int64_t lead_ns) {
    const auto audio_ns = static_cast<std::int64_t>(h.audio_s * 1e9);
    if (!h.started) return h.pushed_ns + kFirstAudioTargetNs + audio_ns;
    return h.listener_start_ns + audio_ns - lead_ns;
}

inline std::int64_t sentence_deadline_ns(const StreamHorizon& h) {
    return horizon_deadline_ns(h, kSentenceLeadNs);
}

// ---- The order of the work that makes audio ---------------------------------
// Each unit of it (analysing a sentence, a decoder chunk with the flow and
// durations it needs) waits for its turn at the engine's
// DeadlineGate (deadline_gate.h), in two classes: first the work of
// started streams that has become urgent, then everything else, each
// earliest deadline first.
//
//  * Analysing: due as the sentence is (above); a started stream's is
//    urgent from that deadline on.
//  * A decoder chunk: due when the listener reaches the end of the audio
//    written so far, or for a push's first chunk, by the first-audio
//    target. A started stream's is urgent from kChunkUrgentNs before it:
//    what a chunk may still wait and take with every core busy. So while
//    new streams wait, started ones are kept that far ahead and no
//    further; once none waits, they run ahead as far as their rings take.
//
// An offline reader's work (its stream has been read with read()) comes in
// a third class, after all work someone listens to: nobody hears it late,
// and a reader that pushes one reply after another would otherwise be a
// new stream at each push. It takes no turn at the gate: it runs outside
// the order at its thread's own priority (deadline_gate.h). A network
// stream's work (SchedulingClass::Network: a server's, whose reader is a
// socket) keeps its deadlines: its sentences come after the live streams'
// in the front ends' order, and its chunks take turns at a gate of their
// own (deadline_gate.h).
struct WorkDue {
    static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
    std::int64_t deadline_ns = 0;
    std::int64_t urgent_ns = kNever;  // from when it is in the first class
    bool outside = false;             // the third class, outside the turns
    // 0: the first class at `now_ns`, 1: the second, 2: outside the turns.
    int order_class(std::int64_t now_ns) const { return outside ? 2 : now_ns >= urgent_ns ? 0 : 1; }
    // Whether this goes before `o` at `now_ns`.
    bool before(const WorkDue& o, std::int64_t now_ns) const {
        const int a = order_class(now_ns), b = o.order_class(now_ns);
        return a != b ? a < b : deadline_ns < o.deadline_ns;
    }
};

constexpr std::int64_t kChunkUrgentNs = 150'000'000;

inline WorkDue sentence_due(const StreamHorizon& h) {
    const std::int64_t d = sentence_deadline_ns(h);
    return {d, h.started ? d : WorkDue::kNever};
}

inline WorkDue chunk_due(const StreamHorizon& h) {
    const std::int64_t d = horizon_deadline_ns(h, 0);
    return {d, h.started ? d - kChunkUrgentNs : WorkDue::kNever};
}

}  // namespace etude::engine
