// A network's chunk-sized scratch buffers, lent to its streams one push at
// a time, so that the memory they take grows with the pushes running at
// once, not with the streams open.
//
// Why: an incremental stream's layers need a handful of chunk-sized
// buffers (stream_layers.h), but only inside a push; between pushes a
// stream keeps just the few samples each layer holds. Owned by each
// stream, they were most of what a stream in flight cost: for a Piper
// medium voice's HiFi-GAN in 32-frame chunks, 8 buffers of up to 1.3 MB,
// about 10 MB a stream, held for as long as the stream. Lent, a server
// with 16 streams on 2 cores holds 2 sets.
//
// How: a stream keeps its ScratchBuffer objects (its layers hold
// references to them) but empty; a Loan swaps a set of buffers in for the
// push and back out after it. A set keeps its buffers' sizes, so a set
// lent again needs no allocation. Each stream holds a User for its life:
// when the last one goes, the sets are freed, so an idle server does not
// keep them (the network itself lives as long as its voice).
//
// The bound: on a CPU backend at most as many sets are out as the backend
// has workers: pushes beyond that would only share the same cores, so
// they wait (in order of arrival) rather than take another set. A loan
// takes all the sets it needs at once (a batch of several streams needs
// one each), and a holder never waits for another loan, so waits cannot
// form a cycle; a loan larger than the bound waits until no set is out.
// On a GPU sets are never waited for (a batch of pushes needs as many sets
// as it has streams, and the memory is the device's).
//
// Threads: any. Not real-time safe (locks, and a set's first use
// allocates); runs on compute threads, as the pushes do.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "engine/models/stream_layers.h"

namespace etude::engine {

class ScratchLender {
  public:
    // `max_out`: sets lent at once before a loan waits; 0 for no bound.
    explicit ScratchLender(std::size_t max_out) : max_out_(max_out) {}
    // The bound for a network on `backend` (the comment above says why).
    static std::size_t bound_for(const gpu::Backend& backend);

    // Swaps a set into each group of `buffers` (one group per stream, each
    // group the same length) for the loan's life, waiting for the sets as
    // said above.
    class Loan {
      public:
        Loan(ScratchLender& lender, std::span<const std::span<ScratchBuffer* const>> groups);
        ~Loan();
        Loan(const Loan&) = delete;
        Loan& operator=(const Loan&) = delete;

      private:
        ScratchLender& lender_;
        std::span<const std::span<ScratchBuffer* const>> groups_;
    };

    // Held by each stream of the network for its life.
    class User {
      public:
        explicit User(ScratchLender& lender);
        ~User();
        User(const User&) = delete;
        User& operator=(const User&) = delete;

      private:
        ScratchLender& lender_;
    };

    // Sets made so far (each lent again once given back), and sets held
    // now, lent or free: for tests.
    std::size_t sets_made() const;
    std::size_t sets_held() const;

  private:
    using Set = std::vector<gpu::DeviceBuffer>;
    std::size_t max_out_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Set> free_;
    std::size_t out_ = 0, made_ = 0, users_ = 0;
    std::uint64_t next_ticket_ = 0, serving_ = 0;  // loans waiting, first come first served
};

}  // namespace etude::engine
