// LEF, the LibEtude model file: one self-describing file per model. Layout
// and rules are in docs/model-format.md. LefFile maps a file read-only and
// validates all of it before anything is used; LefWriter makes files (tests,
// C++ tools; tools/convert.py writes the same format from PyTorch).
//
// Threads: a LefFile is immutable after open(); share it freely. Errors:
// open() throws etude::Error naming the file and the field or tensor at
// fault, never crashes on a corrupt, truncated or hostile file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace etude::engine {

enum class LefDtype : std::uint8_t { F32 = 0, F16 = 1 };

struct LefTensor {
    std::string name;
    LefDtype dtype = LefDtype::F32;
    std::vector<std::uint64_t> shape;
    std::uint64_t offset = 0;  // from the start of the data section
    std::uint64_t bytes = 0;
    std::uint32_t crc32 = 0;
    std::uint64_t elements() const;
};

class LefFile {
  public:
    static constexpr char kMagic[8] = {'L', 'I', 'B', 'E', 'T', 'U', 'D', 'E'};
    static constexpr std::uint32_t kVersion = 1;
    static constexpr std::size_t kHeaderBytes = 64;
    static constexpr std::size_t kAlignment = 64;
    static constexpr std::size_t kMaxTensors = 1 << 16;
    static constexpr std::size_t kMaxNameBytes = 256;
    static constexpr std::size_t kMaxDims = 8;
    static constexpr std::size_t kMaxMetadataBytes = 1 << 20;

    // Maps and validates `path`; throws etude::Error on any problem.
    static LefFile open(const std::string& path);
    // Validates an image already in memory (the fuzzer's entry point).
    static LefFile from_bytes(std::span<const std::uint8_t> bytes, const std::string& label);

    const std::string& metadata_json() const { return metadata_; }
    const std::vector<LefTensor>& tensors() const { return tensors_; }
    const LefTensor* find(std::string_view name) const;
    // The tensor's values as f32 (f16 is converted); throws etude::Error if
    // absent or if `expected_shape` is given and differs.
    std::vector<float> floats(std::string_view name,
                              std::span<const std::uint64_t> expected_shape = {}) const;
    std::uint32_t flags() const { return flags_; }

  private:
    struct Mapping;
    std::shared_ptr<Mapping> map_;  // keeps the bytes alive
    std::span<const std::uint8_t> bytes_;
    std::string label_;
    std::string metadata_;
    std::vector<LefTensor> tensors_;
    std::map<std::string, std::size_t, std::less<>> by_name_;
    std::uint32_t flags_ = 0;
    std::uint64_t data_offset_ = 0;
};

class LefWriter {
  public:
    explicit LefWriter(std::string metadata_json) : metadata_(std::move(metadata_json)) {}
    void add_f32(const std::string& name, std::vector<std::uint64_t> shape,
                 std::span<const float> values);
    void add_f16(const std::string& name, std::vector<std::uint64_t> shape,
                 std::span<const std::uint16_t> values);
    std::vector<std::uint8_t> bytes() const;
    void write(const std::string& path) const;  // atomically; throws etude::Error

  private:
    void add(const std::string& name, LefDtype dtype, std::vector<std::uint64_t> shape,
             const void* data, std::size_t bytes);
    struct Entry {
        LefTensor info;
        std::vector<std::uint8_t> data;
    };
    std::string metadata_;
    std::vector<Entry> entries_;
};

// IEEE half to float (handles subnormals, infinities and NaN).
float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);

}  // namespace etude::engine
