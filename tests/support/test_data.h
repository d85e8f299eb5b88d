// Where a test program finds tests/data: $ETUDE_TEST_DATA when it is set,
// else the source tree's folder compiled in. The model-layer tests
// (tests/engine/models/) read their reference data through this because
// their program also travels in the GPU pack (scripts/gpu-check.sh), where
// the data lies beside it rather than at this machine's source path.
#pragma once

#include <cstdlib>
#include <string>

namespace etude::test {

inline std::string test_data_dir() {
    const char* set = std::getenv("ETUDE_TEST_DATA");
    return set && *set ? std::string(set) : std::string(ETUDE_TEST_DATA);
}

}  // namespace etude::test
