// Releases (frees, handle destructions) that wait while a device's work is
// being recorded, and the recordings that count as in progress.
//
// Why: CUDA invalidates every stream capture on a device when any thread
// makes a synchronizing call on that device meanwhile, whatever the
// capture's mode; cudaFree and cudaFreeHost synchronize, and so do cuBLAS's
// and cuFFT's destructions, which free their workspaces. The engine records
// a batch's step on one thread (models/recorded_step.h) while other threads
// run and free other streams' buffers, so a free could spoil a recording
// made at the same time: on an H200, 256 streams whose chunks moved between
// the device and the CPU lost flow batches with "operation failed due to a
// previous error during capture" (docs/benchmarks.md, 2026-11-30). Warp and
// PyTorch's CUDA allocator defer frees during captures for the same reason.
//
// The rule: a release made while no recording is in progress runs at once;
// one made while any is (on any thread, the recording thread's own included)
// waits, and the end of the last recording runs every release that waited,
// in the order they came. A release never waits for a recording to end, so
// a thread that releases while it or another records cannot block on that
// recording. A release runs under the gate's lock, so that no recording can
// begin while one runs: a cudaFree, which waits for the device's work, then
// holds up other releases and recordings for that long, and the recording
// thread that ends the last capture runs what waited.
//
// What waits is memory: a pool that trims its cache on out-of-memory and
// tries again (memory_pool.h) gets nothing back from frees that wait, so
// that allocation fails while a recording is in progress, and its batch
// fails over as on any out-of-memory. Any thread. Not for the audio
// callback (a release may allocate).
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace etude::gpu {

class ReleaseAfterCaptures {
  public:
    using Release = std::function<void()>;

    // Counts a recording in progress; call before it begins on the device.
    void begin_capture() {
        std::lock_guard lock(mu_);
        ++captures_;
    }
    // Ends one (call after it ended on the device, whether it succeeded or
    // not); the last to end runs the releases that waited.
    void end_capture() noexcept {
        std::lock_guard lock(mu_);
        if (captures_ > 0) --captures_;
        if (captures_ > 0) return;
        std::vector<Release> due;
        due.swap(waiting_);
        for (auto& r : due) run(r);
    }
    // Runs `r` now, or after the recordings in progress end. noexcept (it
    // serves deleters): a release that cannot be kept for later (no memory
    // to hold it) runs now.
    template <class F>
    void release(F&& r) noexcept {
        std::lock_guard lock(mu_);
        if (captures_ > 0) {
            try {
                waiting_.emplace_back(r);
                return;
            } catch (...) {
            }
        }
        run(r);
    }

    std::size_t captures_in_progress() const {
        std::lock_guard lock(mu_);
        return static_cast<std::size_t>(captures_);
    }
    std::size_t waiting() const {
        std::lock_guard lock(mu_);
        return waiting_.size();
    }

  private:
    template <class F>
    static void run(F& r) noexcept {
        try {
            r();  // (an empty Release throws, and is caught)
        } catch (...) {
            // A release reports nothing (it is a free); a broken device shows
            // up in its next operation instead.
        }
    }

    mutable std::mutex mu_;
    int captures_ = 0;
    std::vector<Release> waiting_;
};

}  // namespace etude::gpu
