// The embedded default voices: Flite's clustergen voices (slt, rms, awb) used
// as a text front end. Flite turns text into acoustic parameters (F0,
// mel-cepstrum, band voicing strengths per 5 ms frame); our own vocoder turns
// those into samples, so Flite's waveform generation is stopped early.
//
// Threads: Flite keeps global state (voice registry, error jump buffer), so
// every call into Flite goes through one process-wide mutex. None of this is
// real-time safe; it runs on the engine's front-end workers, which take a
// built-in voice's sentence only while no other built-in voice's sentence
// is being analysed (the lock).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "engine/streams/word_start.h"

namespace etude::engine {

// Acoustic parameters of one utterance, frame-major.
struct AcousticFrames {
    std::size_t frames = 0;
    std::size_t mcep_order = 0;    // coefficients per frame (c0..)
    std::size_t bands = 0;         // voicing strengths per frame
    std::vector<float> f0;         // frames (Hz, 0 = unvoiced)
    std::vector<float> mcep;       // frames * mcep_order
    std::vector<float> strengths;  // frames * bands
    std::vector<WordStart> words;  // each written word (Flite's token) at its first frame
};

class FliteVoice {
  public:
    // Names accepted by load(): "slt" (default), "rms", "awb".
    static const std::vector<std::string>& names();
    // Registers (once per process) and returns the named voice; throws
    // etude::Error naming the voice and the choices if it is unknown.
    static const FliteVoice& load(std::string_view name);

    const std::string& name() const { return name_; }
    // Vocoder settings read from the voice's clustergen database.
    const dsp::MlsaConfig& vocoder_config() const { return vocoder_; }
    double sample_rate() const { return vocoder_.sample_rate; }

    // Text -> parameters for one utterance (best as one sentence). Returns an
    // empty result for text that has nothing to say; throws etude::Error if
    // Flite reports an error. `duration_stretch` scales every segment's
    // predicted duration (Flite's own "duration_stretch": above 1 slower,
    // below faster), which is how the built-in voices take a speaking pace.
    AcousticFrames analyse(std::string_view text, float duration_stretch = 1.0f) const;

    // Test hook: the waveform Flite's own vocoder makes from the same
    // parameters, with the C library's rand() reseeded by srand(seed) first.
    std::vector<short> reference_waveform(std::string_view text, unsigned seed,
                                          AcousticFrames* frames_out) const;

    // Benchmark baseline: Flite's complete synthesis (its own vocoder), as the
    // `flite` program does it; returns the number of samples made.
    std::size_t flite_synthesize(std::string_view text) const;

  private:
    FliteVoice(std::string name, void* voice);

    std::string name_;
    void* voice_;  // cst_voice*, owned by Flite's registry for the process lifetime
    dsp::MlsaConfig vocoder_;
};

}  // namespace etude::engine
