// Waiting in a test for other threads to reach a state, without a clock
// deciding the result.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "support/emulation.h"

namespace etude::test {

// Waits until ready() holds, or a bound passes: how long threads take to
// meet, not a timing check (under an emulator, 10-50 times slower, the bound
// is ten times longer). The caller checks what it waited for afterwards.
inline void wait_until(const std::function<bool()>& ready) {
    const auto bound = std::chrono::seconds(emulator() ? 600 : 60);
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!ready() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

}  // namespace etude::test
