// A Piper voice's decoder as the engine's HiFi-GAN (models/hifigan.h).
//
// Piper's decoder is the HiFi-GAN generator, with the latent's channels in
// place of mel bands, no bias on the output conv, and, for several speakers,
// a 1x1 conv of the speaker embedding added after the input conv. That
// addition is the same for every frame, so it folds into the input conv's
// bias: one decoder per speaker, and the whole HiFi-GAN machinery (all three
// backends, chunked streaming with exact context) applies unchanged.
//
// The LEF metadata's mel fields (n_fft, mel scale, ...) are required by the
// LEF reader but mean nothing here: nothing computes a mel for a VITS voice.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/models/neural_model.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/backend.h"

namespace etude::engine {

// The decoder of `speaker` (ignored with one speaker) as LEF bytes.
std::vector<std::uint8_t> vits_decoder_lef(const VitsWeights& weights, int sample_rate,
                                           int speaker);

std::shared_ptr<NeuralModel> load_vits_decoder(const VitsWeights& weights, int sample_rate,
                                               int speaker, const std::string& label,
                                               std::shared_ptr<gpu::Backend> backend);

}  // namespace etude::engine
