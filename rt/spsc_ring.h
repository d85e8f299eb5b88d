/// \file
/// Single-producer single-consumer ring buffer of trivially copyable items.
/// A public header: a host passes audio out of its callback through it (the
/// PortAudio output's tap, `etude say --play -o`), as the engine does.
///
/// Threads: exactly one producer thread calls write()/write_available(); exactly one
/// consumer thread calls read()/read_available()/discard(). Both sides are wait-free:
/// every call finishes in a bounded number of steps, never blocks, never allocates.
/// Full: write() stores what fits and returns the count. Empty: read() returns 0.
/// Capacity is fixed at construction (rounded up to a power of two); the only
/// allocation happens there.
///
/// Hand-written rather than moodycamel::ReaderWriterQueue because the audio path
/// moves blocks of samples, and a bulk copy with one index update per block is what
/// keeps the callback O(block) with two atomic operations, not one per sample.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>

namespace etude::rt {

/// A wait-free ring of `T` between one producer and one consumer thread.
template <typename T>
class SpscRing {
    static_assert(std::is_trivially_copyable_v<T>);

  public:
    /// Holds at least `min_capacity` items (a power of two, at least 2);
    /// the only allocation.
    explicit SpscRing(std::size_t min_capacity)
        : capacity_(std::bit_ceil(std::max<std::size_t>(min_capacity, 2))),
          mask_(capacity_ - 1),
          data_(std::make_unique<T[]>(capacity_)) {}

    SpscRing(const SpscRing&) = delete;  ///< not copyable
    SpscRing& operator=(const SpscRing&) = delete;

    /// The items it holds when full.
    std::size_t capacity() const { return capacity_; }

    /// Producer: room for this many items now.
    std::size_t write_available() const {
        const auto w = write_.load(std::memory_order_relaxed);
        const auto r = read_.load(std::memory_order_acquire);
        return capacity_ - (w - r);
    }
    /// Producer: stores what fits of `items`; returns how many.
    std::size_t write(std::span<const T> items) {
        const auto w = write_.load(std::memory_order_relaxed);
        const auto r = read_.load(std::memory_order_acquire);
        const std::size_t n = std::min(items.size(), capacity_ - (w - r));
        copy_in(w, items.first(n));
        write_.store(w + n, std::memory_order_release);
        return n;
    }

    /// Items ever written: the producer's position (producer thread only).
    std::uint64_t write_position() const { return write_.load(std::memory_order_relaxed); }

    /// Items ever read: the consumer's position (consumer thread only).
    std::uint64_t read_position() const { return read_.load(std::memory_order_relaxed); }
    /// Consumer: items ready to read now.
    std::size_t read_available() const {
        const auto r = read_.load(std::memory_order_relaxed);
        const auto w = write_.load(std::memory_order_acquire);
        return w - r;
    }
    /// Consumer: copies up to `out.size()` items into `out`; returns how
    /// many (0 when empty).
    std::size_t read(std::span<T> out) {
        const auto r = read_.load(std::memory_order_relaxed);
        const auto w = write_.load(std::memory_order_acquire);
        const std::size_t n = std::min(out.size(), w - r);
        copy_out(r, out.first(n));
        read_.store(r + n, std::memory_order_release);
        return n;
    }
    /// Consumer: drops up to `n` items without copying them (a stream's
    /// cancel); returns how many.
    std::size_t discard(std::size_t n) {
        const auto r = read_.load(std::memory_order_relaxed);
        const auto w = write_.load(std::memory_order_acquire);
        n = std::min(n, w - r);
        read_.store(r + n, std::memory_order_release);
        return n;
    }

  private:
    void copy_in(std::size_t pos, std::span<const T> items) {
        const std::size_t start = pos & mask_;
        const std::size_t first = std::min(items.size(), capacity_ - start);
        std::copy_n(items.data(), first, data_.get() + start);
        std::copy_n(items.data() + first, items.size() - first, data_.get());
    }
    void copy_out(std::size_t pos, std::span<T> out) const {
        const std::size_t start = pos & mask_;
        const std::size_t first = std::min(out.size(), capacity_ - start);
        std::copy_n(data_.get() + start, first, out.data());
        std::copy_n(data_.get(), out.size() - first, out.data() + first);
    }

    const std::size_t capacity_;
    const std::size_t mask_;
    std::unique_ptr<T[]> data_;
    // Indices grow without wrapping (64-bit overflow takes millennia of audio);
    // each lives on its own cache line so the two threads do not false-share.
    alignas(64) std::atomic<std::uint64_t> write_{0};
    alignas(64) std::atomic<std::uint64_t> read_{0};
};

}  // namespace etude::rt
