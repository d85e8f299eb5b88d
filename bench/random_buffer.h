// Device buffers of uniform noise in [-1, 1) for the benchmarks: the same
// data on every backend for a given seed.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "gpu/backend.h"

namespace etude::bench {

inline gpu::DeviceBuffer random_buffer(gpu::Backend& b, gpu::Queue& q, std::size_t n,
                                       unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> host(n);
    for (auto& v : host) v = dist(rng);
    auto buf = b.allocate(n, "bench");
    b.copy_to_device(q, buf, 0, host.data(), n);
    b.synchronize(q);  // `host` goes out of scope
    return buf;
}

}  // namespace etude::bench
