// Analysis/synthesis windows.
//
// Pure functions: make_window allocates the returned vector (not real-time safe); everything
// here is safe to call from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace etude::dsp {

enum class WindowType { Hann, Hamming, Blackman, Rectangular };

// periodic = true gives the DFT-even window used for spectral analysis (scipy's sym=False,
// torch.hann_window's default, librosa's get_window): the length-(n+1) symmetric window with
// its last sample dropped. periodic = false gives the symmetric window. n == 0 returns an
// empty vector and n == 1 returns {1}.
std::vector<float> make_window(WindowType type, std::size_t n, bool periodic = true);

// Case-insensitive: "hann" (or "hanning"), "hamming", "blackman", "rectangular" (or "rect",
// "boxcar", "ones"). Anything else gives std::nullopt.
std::optional<WindowType> parse_window(std::string_view name);

}  // namespace etude::dsp
