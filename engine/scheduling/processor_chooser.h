// The scheduling policy's chooser, shared by every kind of stream: the
// BlockScheduler (text: MLSA or spectral blocks) and the MelScheduler (mel
// chunks) both describe their options as candidates, each naming the
// processor that would run it and the quality it would give, with its
// current cost estimate and whether it can be used now, and both pick with
// choose_candidate(). A pure function, so it is tested on its own
// (tests/engine/scheduling_policy_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/engine.h"

namespace etude::engine {

// Where a block or chunk is computed.
enum class Processor : std::uint8_t {
    CpuPrimary,   // the stream's first CPU processor (mel: the producer thread)
    CpuFallback,  // the stream's second CPU processor
    Gpu,          // the device processor (spectral vocoder, neural model)
    Ahead,        // a render worker, ahead of time (not chosen per block)
};

// What the public record calls it (BlockRecord::Processor keeps its values).
constexpr BlockRecord::Processor to_record(Processor p) {
    switch (p) {
        case Processor::CpuPrimary:
            return BlockRecord::Primary;
        case Processor::CpuFallback:
            return BlockRecord::Fallback;
        case Processor::Gpu:
            return BlockRecord::Gpu;
        case Processor::Ahead:
            return BlockRecord::Ahead;
    }
    return BlockRecord::Primary;
}

struct Candidate {
    Processor processor;
    Quality quality;
    std::int64_t estimate_ns;  // expected time from hand-over to result
    bool available;            // false while its processor is busy or unhealthy
};

// The rule: in order of preference, the first available candidate expected
// to finish by the deadline; if none can, the quickest available one (the
// block will be late, but as little as possible). Candidates on `exclude`
// are skipped (the processor that just missed its cut-off). Index into
// `candidates`, or -1 if none is available.
inline int choose_candidate(std::span<const Candidate> candidates, std::int64_t now_ns,
                            std::int64_t deadline_ns,
                            std::optional<Processor> exclude = std::nullopt) {
    int fastest = -1;
    for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
        const auto& c = candidates[static_cast<std::size_t>(i)];
        if (!c.available || c.processor == exclude) continue;
        if (now_ns + c.estimate_ns <= deadline_ns) return i;
        if (fastest < 0 ||
            c.estimate_ns < candidates[static_cast<std::size_t>(fastest)].estimate_ns)
            fastest = i;
    }
    return fastest;
}

}  // namespace etude::engine
