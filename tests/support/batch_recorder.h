// What the joiner and device-lane tests push and record: plain numbers, and
// every batch run in the order the batches ran, with the thread each ran
// on (tests/engine/models/: push_joiner_wait_test.cpp, device_lane_test.cpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/models/stream_joiner.h"

namespace etude::test {

// Far enough that a test that reached it has failed: no batch may wait it
// out in a passing run (ctest's timeout ends a run that does).
inline constexpr std::int64_t kFarNs = 3'600'000'000'000;

struct BatchRecorder {
    std::mutex mu;
    std::vector<std::vector<int>> batches;
    std::vector<std::thread::id> threads;
    engine::PushJoiner<int>::RunBatch run() {
        return [this](std::span<const int> batch) {
            std::lock_guard lock(mu);
            batches.emplace_back(batch.begin(), batch.end());
            threads.push_back(std::this_thread::get_id());
        };
    }
};

}  // namespace etude::test
