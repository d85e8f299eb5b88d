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
#include <cstddef>
#include <cstdint>

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

}  // namespace etude::engine
