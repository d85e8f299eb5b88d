// Statistics counters shared between a real-time writer and any readers.
//
// Threads: add()/store_max() from any thread, wait-free (one relaxed atomic
// RMW, or a CAS loop bounded by concurrent writers for store_max); get() from
// any thread. Relaxed ordering: each counter is exact, but a set of counters
// read one after another is not an atomic snapshot.
#pragma once

#include <atomic>
#include <cstdint>

namespace etude::rt {

class Counter {
  public:
    void add(std::uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
    std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }
    void reset() noexcept { v_.store(0, std::memory_order_relaxed); }

  private:
    std::atomic<std::uint64_t> v_{0};
};

class MaxGauge {
  public:
    void store_max(std::int64_t v) noexcept {
        auto cur = v_.load(std::memory_order_relaxed);
        while (v > cur && !v_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
        }
    }
    std::int64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

  private:
    std::atomic<std::int64_t> v_{0};
};

}  // namespace etude::rt
