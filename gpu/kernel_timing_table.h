// The per-op device times a backend reports through kernel_timings(): calls,
// total and longest time under each op's name, recorded from whichever
// thread finishes the op. One table for the OpenCL, CUDA and Vulkan backends.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

class KernelTimingTable {
  public:
    // One call of `name` that took `ms` on the device; a negative `ms` (a
    // call the device did not time) counts the call only.
    void record(const std::string& name, double ms) {
        std::lock_guard lock(mu_);
        KernelTiming& t = timings_[name];
        t.name = name;
        ++t.calls;
        if (ms > 0) {
            t.total_ms += ms;
            t.max_ms = std::max(t.max_ms, ms);
        }
    }
    std::vector<KernelTiming> snapshot() const {
        std::lock_guard lock(mu_);
        std::vector<KernelTiming> out;
        out.reserve(timings_.size());
        for (const auto& [name, t] : timings_) out.push_back(t);
        return out;
    }
    void clear() {
        std::lock_guard lock(mu_);
        timings_.clear();
    }

  private:
    mutable std::mutex mu_;
    std::map<std::string, KernelTiming> timings_;
};

}  // namespace etude::gpu
