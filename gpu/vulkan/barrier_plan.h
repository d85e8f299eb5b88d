// Which of a command buffer's commands need a barrier before them. A
// command declares the buffers it reads and writes (by their allocations'
// device addresses: the shaders reach buffers through addresses in push
// constants, so no descriptor tells the driver). A command waits behind a
// barrier only when it reads or writes what a command since the last
// barrier wrote, or writes what one read; otherwise it may overlap the
// commands before it. The first command of a buffer always waits, for what
// earlier submissions to the device's queue (other streams') wrote.
//
// Keyed by allocation, not byte range: two views of one allocation count
// as one buffer, which can only add barriers, never drop one that is
// needed. Plain C++, no Vulkan: tested on its own
// (tests/gpu/barrier_plan_test.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace etude::gpu::vk {

// A command's buffers, as allocation addresses; 0 is "none" (an empty
// buffer, an unused slot).
struct BufferAccess {
    std::array<std::uint64_t, 4> reads{};
    std::array<std::uint64_t, 2> writes{};
};

class BarrierPlan {
  public:
    // A new command buffer begins.
    void start() {
        fresh_ = true;
        written_.clear();
        read_.clear();
    }

    // Records the next command; returns whether a barrier goes before it.
    bool next(const BufferAccess& a) {
        bool wait = fresh_;
        for (std::uint64_t r : a.reads) wait = wait || in(written_, r);
        for (std::uint64_t w : a.writes) wait = wait || in(written_, w) || in(read_, w);
        if (wait) {
            written_.clear();
            read_.clear();
            ++barriers_;
        }
        fresh_ = false;
        for (std::uint64_t r : a.reads)
            if (r) read_.push_back(r);
        for (std::uint64_t w : a.writes)
            if (w) written_.push_back(w);
        ++commands_;
        return wait;
    }

    // Since construction: commands recorded and barriers placed before them.
    std::uint64_t commands() const { return commands_; }
    std::uint64_t barriers() const { return barriers_; }

  private:
    static bool in(const std::vector<std::uint64_t>& keys, std::uint64_t key) {
        return key != 0 && std::find(keys.begin(), keys.end(), key) != keys.end();
    }

    bool fresh_ = true;
    // Since the last barrier. Few: a barrier clears them, and a model's
    // independent commands between two barriers are a handful.
    std::vector<std::uint64_t> written_, read_;
    std::uint64_t commands_ = 0, barriers_ = 0;
};

}  // namespace etude::gpu::vk
