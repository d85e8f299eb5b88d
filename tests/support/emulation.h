// Whether the test runs under an emulator: a cross build's ctest sets
// ETUDE_UNDER_EMULATION (tests/CMakeLists.txt) to the emulator's name when it
// runs each test program through it (qemu-aarch64 for aarch64).
//
// Why: an emulated program runs 10-50 times slower than natively, and
// unevenly (translating code as it first meets it), so a test that judges
// deadlines, real-time pulls or a JACK client's timing would test qemu, not
// LibEtude. Such a test skips there, saying so, rather than fail or pass on
// a result that means nothing; it still runs in the native suite.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace etude::test {

// The emulator's name, or nullptr when the test runs natively.
inline const char* emulator() {
    const char* name = std::getenv("ETUDE_UNDER_EMULATION");
    return name && *name ? name : nullptr;
}

}  // namespace etude::test

// In a test body or SetUp: skip, naming the emulator and what is timed.
#define ETUDE_SKIP_WHEN_EMULATED(what_is_timed)                                              \
    do {                                                                                     \
        if (const char* emulator_ = ::etude::test::emulator())                               \
            GTEST_SKIP() << "timing means nothing under emulation (" << emulator_            \
                         << "): " << (what_is_timed) << "; the native suite runs this test"; \
    } while (0)
