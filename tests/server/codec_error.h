// How far a lossy codec's decoded samples are from what it was given: the
// server's encoding tests (mp3, opus, aac) judge each codec by this.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace etude::test {

// Signal-to-error ratio in dB of `got` against `want`, at the lag (0 to
// `max_lag` samples: a codec's delay) where it is best.
inline double best_snr_db(const std::vector<short>& want, const std::vector<short>& got,
                          std::size_t max_lag) {
    double signal = 0;
    for (short v : want) signal += double(v) * v;
    double best = -1e9;
    for (std::size_t lag = 0; lag <= max_lag && lag < got.size(); ++lag) {
        double err = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double g = i + lag < got.size() ? got[i + lag] : 0.0;
            err += (g - want[i]) * (g - want[i]);
        }
        best = std::max(best, 10 * std::log10(signal / std::max(err, 1e-9)));
    }
    return best;
}

}  // namespace etude::test
