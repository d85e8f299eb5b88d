// A Piper flow's input for tests: `channels` x `frames` draws of a unit
// normal (the prior's latent before the flow), the same for a seed on
// every machine (std::mt19937 and std::normal_distribution<float> of one
// standard library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace etude::test {

inline std::vector<float> random_prior(int channels, int frames, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> p(std::size_t(channels) * std::size_t(frames));
    for (float& v : p) v = normal(gen);
    return p;
}

}  // namespace etude::test
