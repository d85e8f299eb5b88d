// A length scale that puts one phoneme's frames exactly on a whole number,
// so that a device's analysis of the sentence must leave it to the host
// (VitsTextToLatent::kDurationTieMargin): what the near-tie tests of the
// device's text analysis share.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/models/vits/duration_predictor_network.h"
#include "engine/models/vits/text_to_latent.h"

namespace etude::test {

// From the log durations `device` gives for `ids` with the noise a
// generator seeded with `seed` draws first (as the host's prior draws it,
// at the default scales), phoneme `i`'s frames moved up to the next whole
// number but one.
inline float tie_length_scale(const engine::VitsTextToLatent& host,
                              const engine::VitsDurationNetwork& device,
                              std::span<const std::int64_t> ids, int speaker, std::uint64_t seed,
                              std::size_t i) {
    std::vector<double> logw;
    const engine::VitsLogDurations capture = [&](const engine::VitsEncoding& e,
                                                 std::span<const double> z) {
        logw = device.log_durations(e, z, speaker);
        return std::vector<double>{};  // the host makes this prior; the log durations are kept
    };
    std::mt19937_64 g(seed);
    host.prior(host.encode(ids), speaker, engine::VitsScales{0.667f, 1.0f, 0.8f}, g, capture);
    const double frames = std::exp(logw.at(i));
    return static_cast<float>(std::ceil(frames + 1.0) / frames);
}

}  // namespace etude::test
