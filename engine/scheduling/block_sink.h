// Where a stream's executors (BlockScheduler, the mel path) put their audio:
// the stream's playback ring, reached through the stream, which knows when
// a write ends the queued speech, when the first audio of a push is ready,
// and when the stream is shutting down.
//
// Threads: the stream's producer thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/streams/work_items.h"

namespace etude::engine {

class BlockSink {
  public:
    virtual ~BlockSink() = default;
    // Waits until the ring holds less than the latency target (so the
    // producer stays a fixed distance ahead) and has room for `samples`.
    // False if `generation` was cancelled or the stream is shutting down.
    virtual bool wait_for_room(std::size_t samples, std::uint64_t generation) = 0;
    // Writes all of `samples`, waiting for space; `last_chunk` ends the item
    // (it goes in whole, after its end position is published). False if
    // cancelled or shutting down meanwhile.
    virtual bool write(std::span<const float> samples, const ItemOrigin& origin,
                       bool last_chunk) = 0;
    virtual bool cancelled(std::uint64_t generation) const = 0;
    virtual bool shutting_down() = 0;
};

}  // namespace etude::engine
