// Fault injection for tests and drills: one vocabulary, one environment
// variable, parsed here and nowhere else.
//
// ETUDE_FAULT (and StreamOptions::faults, which it adds to) holds items
// separated by commas:
//   slow:PROBABILITY:MS[:SEED]           the primary CPU processor takes MS
//                                        longer on that share of its blocks
//   fallback-slow:PROBABILITY:MS[:SEED]  the same for the fallback processor
//   slow-analysis:MS                     each sentence's analysis (on a front
//                                        end, in its turn) takes MS longer
//   slow-split:MS                        each push's split into sentences (on
//                                        the pushing thread, holding the
//                                        stream's input) takes MS longer
//   cpu-busy                             a decoder's CPU tier (a mel stream's,
//                                        a Piper voice's) is busy: its chunks
//                                        go to the device tier whenever that
//                                        may be tried; the CPU remakes what
//                                        the device fails and stands in while
//                                        it is held off. Pins the tier at any
//                                        load; text streams ignore it
//   host-analysis                        a Piper stream's text analysis (its
//                                        encoder and durations) stays on the
//                                        host, so a drill's AFTER counts the
//                                        flow's and the decoder's device
//                                        operations alone
//   kernel:COUNT[:MS[:AFTER]]            the GPU fails COUNT operations,
//   oom:COUNT[:MS[:AFTER]]               runs out of memory on them,
//   late:COUNT:MS[:AFTER]                or finishes them MS late, after
//                                        AFTER operations that run normally
// e.g. ETUDE_FAULT=slow:0.05:30 or ETUDE_FAULT=kernel:1:0:1500. The device
// faults are gpu::GpuFault (the backend interface carries them out); they
// reach the device a stream opens (spectral vocoder, or a mel stream's GPU
// tier). Malformed text is an etude::Error naming the item.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpu/backend.h"

namespace etude::engine {

// A processor that is slow on purpose.
struct FaultPlan {
    double slow_probability = 0.0;  // chance that a block is delayed
    double slow_ms = 0.0;           // by this much, on top of its real cost
    std::uint32_t seed = 1;
    bool active() const { return slow_probability > 0.0 && slow_ms > 0.0; }
};

// Everything one fault text asks for.
struct FaultSpec {
    FaultPlan primary, fallback;
    double slow_analysis_ms = 0.0;
    double slow_split_ms = 0.0;
    bool cpu_busy = false;
    bool host_analysis = false;
    std::optional<gpu::GpuFault> device;
};

// Parses `text` (the vocabulary above) on top of `into`; throws etude::Error.
void parse_faults(std::string_view text, FaultSpec& into, std::string_view source);
// StreamOptions::faults, then ETUDE_FAULT from the environment.
FaultSpec faults_for_stream(const std::string& option_text);

}  // namespace etude::engine
