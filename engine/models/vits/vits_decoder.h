// A Piper voice's decoder as the engine's HiFi-GAN (models/hifigan.h).
//
// Piper's decoder is the HiFi-GAN generator, with the latent's channels in
// place of mel bands, no bias on the output conv, and, for several speakers,
// a 1x1 conv of the speaker embedding added after the input conv. That
// addition is the same for every frame, so it folds into the input conv's
// bias: one decoder per speaker, and the whole HiFi-GAN machinery (all three
// backends, chunked streaming with exact context) applies unchanged. The
// decoders of a voice's other speakers share the first one's weights
// (share_vits_decoder) and hold only that bias.
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

// The input conv's bias of `speaker`'s decoder (ignored with one speaker):
// all that differs between two speakers' decoders of one voice. Throws
// etude::Error for a speaker outside the voice's.
std::vector<float> vits_decoder_input_bias(const VitsWeights& weights, int speaker);

// The decoder of `speaker` (ignored with one speaker) as LEF bytes.
std::vector<std::uint8_t> vits_decoder_lef(const VitsWeights& weights, int sample_rate,
                                           int speaker);

std::shared_ptr<NeuralModel> load_vits_decoder(const VitsWeights& weights, int sample_rate,
                                               int speaker, const std::string& label,
                                               std::shared_ptr<gpu::Backend> backend);

// `speaker`'s decoder made from `base`, another speaker's of the same voice
// (load_vits_decoder's), on its backend: every weight shared with `base`
// but the input conv's bias (NeuralModel::sharing_weights): 2 KB of its own
// for a speaker of a medium voice, in place of a copy of the decoder's
// weights. Throws as vits_decoder_input_bias() does.
std::shared_ptr<NeuralModel> share_vits_decoder(std::shared_ptr<const NeuralModel> base,
                                                const VitsWeights& weights, int speaker);

}  // namespace etude::engine
