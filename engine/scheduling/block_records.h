// Block records and trace: what each block of a stream was made by, when,
// and against which deadline. The stream's producer records one per block
// (text blocks, copied-ahead blocks and mel chunks alike); stats(),
// Stream::block_records() and the Chrome trace read them.
//
// Threads: next_index() from the producer only; record() and the readers
// from any thread (one mutex, never taken by the audio callback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "gpu/backend.h"

namespace etude::engine {

class BlockRecorder {
  public:
    // Records kept for stats and traces (a ring; the oldest are dropped).
    // Grown as records come, not made whole at the start: 65,536 records
    // are 5 MB, which every stream held though a reply of a few sentences
    // writes a few hundred.
    static constexpr std::size_t kCapacity = 1 << 16;

    std::uint64_t next_index() { return next_index_++; }
    std::uint64_t peek_index() const { return next_index_; }
    void record(const BlockRecord& rec);
    void note_fallback();
    // The most recent records (at most `max`), oldest first.
    std::vector<BlockRecord> records(std::size_t max) const;
    // Fills the block counters of `stats`.
    void fill_stats(StreamStats& stats) const;

  private:
    mutable std::mutex mu_;
    std::vector<BlockRecord> records_;
    std::size_t written_ = 0;
    std::uint64_t by_processor_[4] = {0, 0, 0, 0};
    std::uint64_t fallbacks_ = 0, late_ = 0, reduced_ = 0;
    std::uint64_t next_index_ = 0;  // producer thread
};

// Writes `records` as a Chrome trace (JSON; Perfetto, chrome://tracing),
// with each device's per-kernel time as counters, atomically: into
// a temporary beside it (engine/partial_path.h), renamed to `path` when whole. Throws etude::Error
// naming the path and the reason.
void write_chrome_trace(
    const std::string& path, const std::vector<BlockRecord>& records,
    const std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>>& kernel_timings);

}  // namespace etude::engine
