/// \file
/// Statistics counters shared between a real-time writer and any readers.
/// A public header: a host counts what happens in its audio callback with
/// them (the JACK output's xruns and callbacks), as the engine does.
///
/// Threads: add()/store_max() from any thread, wait-free (one relaxed atomic
/// RMW, or a CAS loop bounded by concurrent writers for store_max); get() from
/// any thread. Relaxed ordering: each counter is exact, but a set of counters
/// read one after another is not an atomic snapshot.
#pragma once

#include <atomic>
#include <cstdint>

namespace etude::rt {

/// A count that only grows (until reset()), wait-free on every side.
class Counter {
  public:
    /// Adds `n`; wait-free, callable on the audio thread.
    void add(std::uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
    /// The count now.
    std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }
    /// Back to 0.
    void reset() noexcept { v_.store(0, std::memory_order_relaxed); }

  private:
    std::atomic<std::uint64_t> v_{0};
};

/// The largest value stored so far (0 at first).
class MaxGauge {
  public:
    /// Keeps `v` if it is larger than the value held; lock-free.
    void store_max(std::int64_t v) noexcept {
        auto cur = v_.load(std::memory_order_relaxed);
        while (v > cur && !v_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
        }
    }
    /// The largest value stored.
    std::int64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

  private:
    std::atomic<std::int64_t> v_{0};
};

}  // namespace etude::rt
