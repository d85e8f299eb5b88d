// Vocos (the mel model with the ISTFT head) on any gpu::Backend: the
// embedding conv, ConvNeXt blocks, the final layer norm and the head that
// turns each frame into one inverse-FFT frame, run two ways that give the
// same values: over a whole window of mel frames, and incrementally (the
// convolutions as stream layers), each frame computed once.
#pragma once

#include <memory>
#include <vector>

#include "engine/models/device_weights.h"
#include "engine/models/metadata_reader.h"
#include "engine/models/vocoder_network.h"

namespace etude::engine {

// Reads the hyperparameters (throws etude::Error naming the field or
// tensor), uploads the weights through `loader`, sets the receptive field
// in mel frames on each side and the ISTFT synthesis window. The network
// runs on `backend`, which must outlive it.
std::unique_ptr<VocoderNetwork> make_vocos_network(const MetadataReader& meta,
                                                   const ModelAudioParams& audio,
                                                   WeightLoader& loader, gpu::Backend& backend,
                                                   int& left_context, int& right_context,
                                                   std::vector<float>& window);

}  // namespace etude::engine
