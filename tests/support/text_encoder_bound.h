// The bound a text encoder on a backend holds against the host's
// (VitsTextToLatent::encode), from float rounding rather than from what a
// device gave.
//
// The host encoder is run again with every embedding value moved by one
// float rounding (times 1 +- 2^-24, signs at random), and the largest
// change of its output, E1, is how far one rounding of the signal moves
// the result. The device rounds its signal once per operation: S of them
// in sequence (per layer the three projections, the scores, the softmax,
// the values, the output projection, the residual sum and the norm, then
// the two convolutions, the sum and the norm: 12; plus the final
// projection), each a sum of at most K products whose rounding is about
// sqrt(K) times one (K = filter_channels * kernel, the widest). So the
// bound is 2 * S * sqrt(K) * E1 (2: the host rounds too), and a wrong
// index, a missed term or a misplaced band moves the output by O(1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>

#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_weights.h"
#include "support/model_parity.h"

namespace etude::test {

inline double encoding_diff(const engine::VitsEncoding& a, const engine::VitsEncoding& b) {
    return std::max(max_abs_diff(a.stats, b.stats), max_abs_diff(a.hidden, b.hidden));
}

// E1 above: the host encoder's change when its embedding moves by one
// float rounding.
inline double one_rounding_change(const engine::VitsWeights& w, std::span<const std::int64_t> ids,
                                  const engine::VitsEncoding& host) {
    auto moved = std::make_shared<engine::VitsWeights>(w);
    for (auto& t : moved->tensors)
        if (t.role == "enc_p.emb.weight") {
            std::mt19937 rng(7);
            for (float& v : t.values) v *= (rng() & 1) ? 1.0f + 0x1p-24f : 1.0f - 0x1p-24f;
        }
    return encoding_diff(engine::VitsTextToLatent(moved).encode(ids), host);
}

inline double encoder_bound(const engine::VitsHyperparameters& hp, double one_rounding) {
    const int stages = 12 * hp.n_layers + 1;
    const double widest = std::sqrt(double(hp.filter_channels) * hp.ffn_kernel);
    return 2.0 * stages * widest * one_rounding;
}

}  // namespace etude::test
