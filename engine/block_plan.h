// The scheduler's per-block decision, as a pure function so it can be tested
// on its own: given the candidates (processor, tier) in order of preference,
// each with its current estimate and whether its processor is free, pick the
// first that is free and expected to finish by the deadline; if none can,
// the quickest free one (the block will be late, but as little as possible).
#pragma once

#include <cstdint>
#include <span>

#include "dsp/mlsa_vocoder.h"

namespace etude::engine {

struct PlanCandidate {
    int processor;
    dsp::MlsaTier tier;
    std::int64_t estimate_ns;
    bool busy;
};

// Index into `candidates`, or -1 if every candidate's processor is busy (or
// excluded).
inline int choose_candidate(std::span<const PlanCandidate> candidates, std::int64_t now_ns,
                            std::int64_t deadline_ns, int exclude_processor = -1) {
    int fastest = -1;
    for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
        const auto& c = candidates[static_cast<std::size_t>(i)];
        if (c.busy || c.processor == exclude_processor) continue;
        if (now_ns + c.estimate_ns <= deadline_ns) return i;
        if (fastest < 0 ||
            c.estimate_ns < candidates[static_cast<std::size_t>(fastest)].estimate_ns)
            fastest = i;
    }
    return fastest;
}

}  // namespace etude::engine
