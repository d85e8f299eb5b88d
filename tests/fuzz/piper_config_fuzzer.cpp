// libFuzzer target for a Piper voice's .onnx.json: any text must give a
// config or etude::Error naming the field, never crash or hang. Seed it with
// tests/data/piper/*.onnx.json.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "engine/piper/voice_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        (void)etude::piper::parse_voice_config(
            std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx.json");
    } catch (const etude::Error&) {
    }
    return 0;
}
