// The CUDA module's one ReleaseAfterCaptures (gpu/release_after_captures.h):
// every free and handle destruction that synchronizes the device goes
// through it, and every stream capture counts in it, so that no thread's
// free invalidates another's capture. One for the process rather than one
// per device: a free then waits for a capture on another GPU too, which
// costs a little memory for a moment and is never wrong. Private to the
// CUDA module.
#pragma once

#include "gpu/release_after_captures.h"

namespace etude::gpu::cuda {

inline ReleaseAfterCaptures& capture_gate() {
    // Never destroyed: deleters may run during the process's static
    // destruction, after a function-local object would be gone.
    static auto* gate = new ReleaseAfterCaptures;
    return *gate;
}

}  // namespace etude::gpu::cuda
