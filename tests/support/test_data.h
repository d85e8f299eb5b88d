// Where a test program finds tests/data: $ETUDE_TEST_DATA when it is set,
// else the source tree's folder compiled in. The model-layer tests
// (tests/engine/models/) and the engine's (tests/engine/) read their data
// through this because their programs also travel to a GPU machine
// (scripts/gpu-check.sh, docs/backends.md), where the data lies beside
// them rather than at this machine's source path.
#pragma once

#include <cstdlib>
#include <string>

namespace etude::test {

inline std::string test_data_dir() {
    const char* set = std::getenv("ETUDE_TEST_DATA");
    return set && *set ? std::string(set) : std::string(ETUDE_TEST_DATA);
}

}  // namespace etude::test
