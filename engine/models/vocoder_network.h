// The interface a network family implements (models/hifigan.cpp,
// models/vocos.cpp): one evaluation over a window of mel frames, and an
// incremental runner on the same weights. NeuralModel holds one.
#pragma once

#include <memory>
#include <vector>

namespace etude::engine {

// A network run incrementally (models/stream_layers.h): every layer keeps
// the input its kernel still needs, so each mel frame is computed once.
// Made by NeuralModel::open_stream(); one utterance at a time.
class NetworkStream {
  public:
    virtual ~NetworkStream() = default;
    virtual void reset() = 0;  // a new utterance
    // Takes `frames` more mel frames ([n_mels][frames]) and appends to
    // `values` those the network can now complete (values_per_frame() per
    // frame, in order; HiFi-GAN may end inside a frame). flush: the utterance
    // ends here, append everything left.
    virtual void push(const float* mel, int frames, bool flush, std::vector<float>& values) = 0;
};

// One network evaluation over a window of mel frames: the part of the model
// that depends on its weights. Implemented per architecture.
class VocoderNetwork {
  public:
    virtual ~VocoderNetwork() = default;
    // Values produced per mel frame: HiFi-GAN gives `hop` audio samples;
    // Vocos gives one inverse-FFT frame of n_fft samples (not yet windowed
    // or overlap-added).
    virtual int values_per_frame() const = 0;
    // Runs the network on `frames` mel frames, `mel` holding them channel by
    // channel ([n_mels][frames], as PyTorch holds a mel), and writes the
    // values of frames [first, first + count) to `out`.
    virtual void run(const float* mel, int frames, int first, int count, float* out) = 0;
    // An incremental runner on the same weights and backend, or null when a
    // layer's shape does not allow one (the stream then recomputes context).
    virtual std::unique_ptr<NetworkStream> open_stream(int right_context) const = 0;
};

}  // namespace etude::engine
