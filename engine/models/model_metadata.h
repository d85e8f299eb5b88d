// What a neural model's metadata says about its audio: the mel front end
// that trained it and the rate of the audio it makes. Read from a LEF file's
// JSON metadata (docs/model-format.md) and checked field by field.
#pragma once

#include <string>

#include "dsp/log_mel.h"

namespace etude::engine {

// Audio side of a model, read from its metadata: what the mel front end that
// trained it computed, and the rate of the audio it produces.
struct ModelAudioParams {
    std::string architecture;  // "hifigan" or "vocos"
    int sample_rate = 0;
    int n_fft = 0, hop = 0, win_length = 0, n_mels = 0;
    double fmin = 0, fmax = 0;
    std::string mel_scale;  // "slaney" or "htk"
    std::string mel_norm;   // "slaney" or "none"
    double mel_power = 1;
    double log_floor = 1e-5;
    double magnitude_eps = 0;
    std::string padding;  // "reflect_half" (HiFi-GAN) or "center" (Vocos)
};

// The log-mel front end a model was trained with (for copy synthesis and
// for the phase-reconstruction tier).
dsp::LogMelConfig log_mel_config(const ModelAudioParams& audio);
// The audio parameters of the model in a LEF file, without building the
// network or uploading weights (the file is still validated whole). Throws
// etude::Error as NeuralModel::load does.
ModelAudioParams read_model_audio(const std::string& path);

}  // namespace etude::engine
