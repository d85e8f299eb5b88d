// The fallback recording (backends without a native one: CPU, OpenCL): the
// operations a record() body issued, each an *_impl call with its checked
// arguments and non-owning views of its buffers, run again in order by
// replay(). Private to gpu/backend_ops.cpp and gpu/backend_recording.cpp.
#pragma once

#include <functional>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

struct OpLog final : RecordedWork {
    std::vector<std::function<void(Queue&)>> ops;
};

}  // namespace etude::gpu
