/// \file
/// A neural vocoder (a LEF model: HiFi-GAN or Vocos) run over a whole mel
/// spectrogram, step by step, offline, with the CPU behind the device: a
/// device that fails while the model is made, or at any step (an error, a
/// fence that never signals), hands the rest to the model on the CPU, which
/// goes on from the same state, so the output stays the same to float
/// rounding. For tools that vocode files (`etude vocode`, `etude resynth`);
/// a stream vocodes mel as it arrives through Engine::create_stream()
/// (MelVoiceOptions::model), with its own deadline-driven tiers.
///
/// Threads: one object from one thread at a time; not for the audio
/// callback (it allocates and runs the network).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace etude::engine {

/// What a vocoder model takes and makes (its metadata).
struct VocoderModelFacts {
    std::string architecture;  ///< "hifigan" or "vocos"
    int sample_rate = 0;       ///< the audio it makes, in Hz
    int n_mels = 0;            ///< the mel bands a frame holds
};

/// A vocoder model over one mel spectrogram or signal at a time.
class FileVocoder {
  public:
    /// Told when a device fails and the CPU takes over: the device's error,
    /// and whether it failed while the model was made on it (else at a
    /// step, the CPU then making the rest of the audio).
    using DeviceFailure = std::function<void(const std::string& error, bool while_loading)>;

    /// Loads `model_path` where a mel stream's model tier would run for
    /// `backend` and `device` (as StreamOptions::backend and device; the
    /// environment applied; "auto": a GPU if there is one, else the CPU).
    /// The device drills of ETUDE_FAULT reach it as they reach a stream's.
    /// Throws etude::Error for a model that cannot be read and
    /// std::invalid_argument for a request that names no device here.
    FileVocoder(const std::string& model_path, const std::string& backend, int device,
                DeviceFailure on_failure);
    ~FileVocoder();  ///< frees the model's copies

    /// What the model takes and makes.
    const VocoderModelFacts& model() const;
    /// Where the network runs, and why: "vulkan NAME", "CPU (NAME is not a
    /// GPU)", "the CPU after a device failure", "..., then the CPU after a
    /// device failure".
    const std::string& where() const;

    /// Vocodes frames [first, first + count) of `mel`, which holds `frames`
    /// frames laid out [n_mels][frames] (as PyTorch holds a mel); returns
    /// the audio that is final.
    std::vector<float> push(std::span<const float> mel, int frames, int first, int count);
    /// No more frames: the rest of the audio; the next push() starts anew.
    std::vector<float> finish();

    /// The log-mel of `audio` (at the model's rate) through the front end
    /// the model was trained with (from its metadata), laid out
    /// [n_mels][frames]; `frames` receives the frame count.
    std::vector<float> log_mel(std::span<const float> audio, std::size_t& frames) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace etude::engine
