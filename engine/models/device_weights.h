// A network's weights on its device, and the scratch buffers its runs use:
// what every model loader of this folder shares. Not a public interface.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/models/lef_file.h"
#include "gpu/backend.h"

namespace etude::engine {

using Shape = std::vector<std::uint64_t>;

inline constexpr const char* kWeightsTag = "model weights";
inline constexpr const char* kWorkTag = "vocoder workspace";

struct DeviceTensor {
    gpu::DeviceBuffer buffer;
    Shape shape;
};

class WeightLoader {
  public:
    WeightLoader(const LefFile& file, gpu::Backend& backend, gpu::Queue& queue)
        : file_(file), backend_(backend), queue_(queue) {}
    DeviceTensor load(const std::string& name, const Shape& shape) {
        auto values = file_.floats(name, shape);  // checks the shape
        return upload(std::move(values), shape);
    }
    std::vector<float> host(const std::string& name, const Shape& shape) const {
        return file_.floats(name, shape);
    }
    DeviceTensor upload(std::vector<float> values, Shape shape) {
        staged_.push_back(std::move(values));
        const auto& v = staged_.back();
        DeviceTensor t{backend_.allocate(v.size(), kWeightsTag), std::move(shape)};
        backend_.copy_to_device(queue_, t.buffer, 0, v.data(), v.size());
        return t;
    }
    const LefFile& file() const { return file_; }
    void finish() {
        backend_.synchronize(queue_);
        staged_.clear();
    }

  private:
    const LefFile& file_;
    gpu::Backend& backend_;
    gpu::Queue& queue_;
    std::vector<std::vector<float>> staged_;  // host copies alive until the copies land
};

// Device scratch buffers, grown on demand and kept between runs.
class Workspace {
  public:
    static constexpr std::size_t kSlots = 8;
    explicit Workspace(gpu::Backend& backend) : backend_(backend) {}
    // References stay valid across calls (fixed slots), so a run can hold several.
    gpu::DeviceBuffer& get(std::size_t slot, std::size_t floats) {
        auto& b = buffers_.at(slot);
        if (b.floats() < floats) {
            b = gpu::DeviceBuffer();
            b = backend_.allocate(floats + floats / 4, kWorkTag);
        }
        return b;
    }

  private:
    gpu::Backend& backend_;
    std::array<gpu::DeviceBuffer, kSlots> buffers_;
};

// A convolution's weights and shape (in_length and batch filled per run).
struct ConvLayer {
    DeviceTensor weight, bias;
    gpu::Conv1dShape shape;  // in_length and batch filled per run
};

// "resblocks.3.", "ups.0": the names PyTorch gives the layers of a list.
inline std::string tensor_name(const char* prefix, std::size_t i, const char* suffix = "") {
    return std::string(prefix) + std::to_string(i) + suffix;
}

}  // namespace etude::engine
