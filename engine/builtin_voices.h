/// \file
/// The built-in (Flite) voices' vocoder settings, and Flite's own synthesis
/// with them, for tools that show or measure the voices (`etude voices`,
/// `etude bench`). Their other facts are Engine::list_voices()'.
///
/// Threads: any non-real-time thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace etude::engine {

/// How a built-in voice is vocoded: the MLSA settings its clustergen
/// database gives.
struct BuiltinVoiceVocoding {
    double sample_rate = 0;              ///< the voice's own rate in Hz
    std::size_t mel_cepstral_order = 0;  ///< mel-cepstral coefficients per frame
    std::size_t excitation_bands = 0;    ///< bands of the mixed excitation
};

/// The vocoding of built-in voice `name`, which is loaded (once per
/// process). Throws etude::Error listing the built-in voices for another
/// name.
BuiltinVoiceVocoding builtin_voice_vocoding(const std::string& name);

/// Flite's complete synthesis of `text` with built-in voice `name` (Flite's
/// own vocoder, as the `flite` program makes it), the audio dropped: the
/// baseline `etude bench` measures LibEtude against. Returns the samples
/// made, at the voice's rate. Throws as builtin_voice_vocoding().
std::size_t flite_reference_synthesis(const std::string& name, std::string_view text);

}  // namespace etude::engine
