// SSML's <prosody rate= pitch= range= volume=> as the engine applies it:
// factors on a sentence (its pace, its F0, its F0's range, its amplitude), read from the
// attribute values SSML 1.1 defines. Nested elements multiply. A value the
// engine cannot read or apply is ignored, as SSML lets a processor do, and
// the text is spoken as it would be without it.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace etude::engine {

struct Prosody {
    float rate = 1.0f;   // speaking speed, times the voice's (2: twice as fast); 0.1..10
    float pitch = 1.0f;  // F0, times the voice's; 0.5..2 (built-in voices only)
    float range =
        1.0f;  // F0's spread about its mean, times the voice's; 0..4 (built-in voices only)
    float volume = 1.0f;  // amplitude, times the voice's; 0..4

    bool operator==(const Prosody&) const = default;
    // This inside `outer` (an element inside another), clamped.
    Prosody within(const Prosody& outer) const;
};

// Each returns the factor, or nothing for a value that is not one SSML allows
// (or, for pitch, one in Hz, which needs the voice's own F0 to apply).
// rate: "x-slow" .. "x-fast", "default", "150%" (of the voice's rate), "+20%",
//   "-20%", or a number ("1.5": a multiplier).
std::optional<float> prosody_rate(std::string_view value);
// pitch: "x-low" .. "x-high", "default", "+10%", "-10%", "+2st", "-3st".
std::optional<float> prosody_pitch(std::string_view value);
// volume: "silent", "x-soft" .. "x-loud", "default", "+6dB", "-6dB",
//   "+50%", "-50%", or SSML 1.0's "0" .. "100" (100 as made).
std::optional<float> prosody_volume(std::string_view value);
// range: "x-low" (0.25) .. "x-high" (2), "default", "+50%", "-50%", "+2st".
std::optional<float> prosody_range(std::string_view value);

// A sentence's F0 track (Hz per frame, 0 where unvoiced) with `p`'s range
// and pitch: each voiced frame's distance from the voiced frames' mean
// times the range, then every voiced frame times the pitch.
void shape_f0(std::span<float> f0, const Prosody& p);

}  // namespace etude::engine
