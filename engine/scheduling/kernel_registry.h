// The kernel benchmark table behind calibrate_kernels() (engine/devices.h,
// `etude devices --calibrate`; its row types are there): for each of
// a handful of backend operations (GEMM, conv1d, rfft, activations, ...), how
// long every backend on this machine takes at a representative size, and
// which one is fastest.
// It informs a person choosing --backend; the engine does not consult it (the
// engine's own GPU/CPU choice is made per block by its scheduler).
// Calibration runs each operation a few times on every candidate backend
// (device copies excluded, queue synchronised) and keeps the fastest capable
// one.
//
// Threads: calibrate() once (it takes as long as the slowest backend needs:
// on PoCL, seconds for clFFT plans); the const accessors from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/devices.h"
#include "gpu/backend.h"

namespace etude::engine {

class KernelRegistry {
  public:
    explicit KernelRegistry(std::vector<std::shared_ptr<gpu::Backend>> backends);

    // Measures every operation on every backend that has the capability it
    // needs; a backend that throws is recorded as unable (negative time).
    void calibrate(int repeats = 5);

    // The backend chosen for `op` (the first backend before calibration).
    std::shared_ptr<gpu::Backend> backend_for(std::string_view op) const;
    const std::vector<KernelChoice>& table() const { return table_; }
    const std::vector<std::shared_ptr<gpu::Backend>>& backends() const { return backends_; }

  private:
    std::vector<std::shared_ptr<gpu::Backend>> backends_;
    std::vector<KernelChoice> table_;
};

}  // namespace etude::engine
