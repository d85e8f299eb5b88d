// Whether this machine has a device of a kind (PoCL's OpenCL and lavapipe's
// Vulkan in CI): the tests that need one skip without it.
#pragma once

#include "gpu/registry.h"

namespace etude::test {

inline bool has_device(gpu::BackendKind kind) {
    for (const auto& d : gpu::DeviceRegistry::instance().devices())
        if (d.kind == kind) return true;
    return false;
}

}  // namespace etude::test
