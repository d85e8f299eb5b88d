/// \file
/// What a LEF model file holds (docs/model-format.md), read after its full
/// validation, for tools that show it (`etude info`). Streams load models
/// through MelVoiceOptions::model.
///
/// Threads: any non-real-time thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace etude::engine {

/// One tensor of a model file.
struct ModelTensor {
    std::string name;                  ///< "generator.conv_pre.weight"
    std::string dtype;                 ///< "f32" or "f16"
    std::vector<std::uint64_t> shape;  ///< its dimensions, outermost first
    std::uint64_t elements = 0;        ///< the product of `shape`
};

/// A model file's metadata and tensors.
struct ModelFileContents {
    std::string metadata_json;         ///< the metadata, as stored (JSON)
    std::vector<ModelTensor> tensors;  ///< in the file's order
};

/// Reads `path` and validates all of it (checksums, bounds, shapes,
/// metadata). Throws etude::Error naming the file and the first problem.
ModelFileContents read_model_file(const std::string& path);

}  // namespace etude::engine
