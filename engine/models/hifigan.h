// HiFi-GAN (V1, V2, V3 and any config of the same family) on any
// gpu::Backend: the generator's conv_pre, upsamplers with their
// multi-receptive-field resblocks, conv_post and tanh, each run two ways that
// give the same values: over a whole window of mel frames, and
// incrementally, layer by layer (stream layers), each frame computed once.
#pragma once

#include <memory>

#include "engine/models/device_weights.h"
#include "engine/models/metadata_reader.h"
#include "engine/models/vocoder_network.h"

namespace etude::engine {

// Reads the hyperparameters (throws etude::Error naming the field), uploads
// the weights through `loader` and sets the receptive field, in mel frames
// on each side. The network runs on `backend`, which must outlive it.
std::unique_ptr<VocoderNetwork> make_hifigan_network(const MetadataReader& meta,
                                                     const ModelAudioParams& audio,
                                                     WeightLoader& loader, gpu::Backend& backend,
                                                     int& left_context, int& right_context);

}  // namespace etude::engine
