// libFuzzer target for the LEF loader: any byte string must be accepted or
// rejected with etude::Error, never crash, hang or touch memory it should not.
// Build: cmake -DETUDE_BUILD_FUZZERS=ON -DCMAKE_CXX_COMPILER=clang++ ... ;
// run:   build/tests/fuzz/lef_fuzzer -max_total_time=600 corpus/
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/error.h"
#include "engine/models/lef_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto f = etude::engine::LefFile::from_bytes(std::span(data, size), "fuzz");
        for (const auto& t : f.tensors()) (void)f.floats(t.name);
    } catch (const etude::Error&) {
    }
    return 0;
}
