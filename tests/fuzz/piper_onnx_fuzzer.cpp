// libFuzzer target for the Piper voice reader: any byte string given as a
// voice's .onnx must be read as a VITS graph or refused with etude::Error,
// never crash, hang, allocate what the file does not hold or read past it.
// Seed it with the test voices (tests/data/piper/*.onnx); see
// docs/troubleshooting.md ("A Piper voice is refused") for what is checked.
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/error.h"
#include "engine/models/vits/onnx_graph.h"
#include "engine/models/vits/vits_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto graph = etude::engine::OnnxGraph::parse(std::span(data, size), "fuzz.onnx");
        (void)etude::engine::read_vits_weights(graph);
    } catch (const etude::Error&) {
    }
    return 0;
}
