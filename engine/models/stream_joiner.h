// Pushes of several streams of one network, made on their own threads (each
// stream's producer), run as one batch (NetworkStream::push_together): a
// push that arrives while a batch runs waits for it and goes in the next one,
// with every other push that arrived meanwhile. Nothing waits for pushes to
// come: a push that finds no batch running runs at once, alone or with those
// already waiting. This is flat combining: the thread whose push starts a
// batch runs it for all of them.
//
// Worth it where one call for many streams is cheaper than one call each: a
// GPU (an H200 made 16 HiFi-GAN streams' 4-frame chunks twice as fast
// together, docs/benchmarks.md). On the CPU it is not: a batch would run on
// one producer's thread what the producers otherwise run side by side, and
// a chunk alone stays in cache from layer to layer.
//
// Errors: an exception from the batch reaches every push in it, so each
// stream handles a device error as its own (MelVocoderStream restores its
// state and the caller remakes the chunk elsewhere). A batch that ran out
// of device memory also halves the batches from then on (JoinStats::cap):
// more streams than the device holds at once go in smaller batches rather
// than every batch failing over to the CPU. Not real-time safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "engine/models/vocoder_network.h"

namespace etude::engine {

struct JoinStats {
    std::uint64_t batches = 0;        // batches run
    std::uint64_t pushes = 0;         // pushes in them
    std::uint64_t largest = 0;        // pushes in the largest
    std::uint64_t cap = 0;            // the most a batch takes now; 0: no bound
    std::uint64_t out_of_memory = 0;  // batches that ran out of device memory
};

class StreamJoiner {
  public:
    using RunBatch = std::function<void(std::span<const StreamPush>)>;

    // Runs `push` in a batch (through `run`, with the pushes waiting beside
    // it) and returns once its values are appended; rethrows the batch's
    // exception.
    void push(const StreamPush& push, const RunBatch& run);
    JoinStats stats() const;

    // For tests: while paused, pushes wait and no batch starts; resume()
    // lets the next one run every push waiting. waiting() counts them.
    void pause();
    void resume();
    std::size_t waiting() const;

  private:
    struct Waiter {
        StreamPush push;
        bool done = false;
        std::exception_ptr error;
    };
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<Waiter*> waiting_;  // in the order they came
    bool running_ = false, paused_ = false;
    JoinStats stats_;
};

}  // namespace etude::engine
