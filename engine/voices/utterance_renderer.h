// Turns one utterance's acoustic frames into audio at a stream's output rate:
// MLSA vocoding at the voice's rate, then resampling (flushed at the end).
//
// Every render starts from a reset vocoder, a restarted noise generator and
// a reset resampler, so an utterance's audio depends only on its frames, the
// voice and the output rate: whichever thread renders it, and whether it is
// rendered into the ring as it goes or into a buffer ahead of time, the
// samples are identical.
//
// Threads: one renderer per thread. Construction allocates; render() does not.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dsp/mlsa_vocoder.h"
#include "dsp/resampler.h"
#include "engine/voices/flite_voice.h"

namespace etude::engine {

// Excitation noise: +-1 from a 32-bit xorshift generator.
class NoiseSource {
  public:
    void restart() { state_ = 0x9E3779B9u; }
    float next() {
        state_ ^= state_ << 13;
        state_ ^= state_ >> 17;
        state_ ^= state_ << 5;
        return (state_ & 0x80000000u) ? 1.0f : -1.0f;
    }

  private:
    std::uint32_t state_ = 0x9E3779B9u;
};

// Vocodes frame `i` of `f`: draws the frame's excitation noise, runs the
// MLSA vocoder (in 16-bit units, as Flite's waveform) and writes floats in
// [-1, 1] to `out`. Returns how many samples it wrote (0 for the priming
// frame). The scheduler's block jobs and the render-ahead workers both call
// this, which is what keeps their audio identical.
inline std::size_t vocode_frame(dsp::MlsaVocoder& vocoder, NoiseSource& noise_source,
                                const AcousticFrames& f, std::size_t i, std::span<float> noise,
                                std::span<double> scratch, std::span<float> out) {
    for (auto& n : noise) n = noise_source.next();
    const std::size_t n = vocoder.synthesize_frame(
        f.f0[i], std::span(f.mcep).subspan(i * f.mcep_order, f.mcep_order),
        std::span(f.strengths).subspan(i * f.bands, f.bands), noise, scratch);
    for (std::size_t k = 0; k < n; ++k)
        out[k] = static_cast<float>(std::clamp(scratch[k] / 32768.0, -1.0, 1.0));
    return n;
}

class UtteranceRenderer {
  public:
    UtteranceRenderer(const FliteVoice& voice, double output_rate)
        : vocoder_(voice.vocoder_config()) {
        const std::size_t period = voice.vocoder_config().frame_period;
        samples_.resize(period);
        floats_.resize(period);
        noise_.resize(period);
        if (output_rate != voice.sample_rate()) {
            resampler_.emplace(voice.sample_rate(), output_rate);
            resampled_.resize(resampler_->max_output_for(period));
            tail_.resize(resampler_->max_output_for(0));
        }
    }

    // Renders all frames of `f`, passing each chunk of output samples to
    // emit(std::span<const float> chunk, bool last_chunk) -> bool. The last
    // call has last_chunk == true (its chunk may be empty). Stops early, and
    // returns false, as soon as emit returns false.
    template <typename Emit>
    bool render(const AcousticFrames& f, Emit&& emit) {
        vocoder_.reset();
        noise_source_.restart();
        if (resampler_) resampler_->reset();
        for (std::size_t i = 0; i < f.frames; ++i) {
            const std::size_t n =
                vocode_frame(vocoder_, noise_source_, f, i, noise_, samples_, floats_);
            const std::span<const float> chunk(floats_.data(), n);
            const bool last = i + 1 == f.frames;
            if (!resampler_) {
                if (!emit(chunk, last)) return false;
                continue;
            }
            const std::size_t m = resampler_->process(chunk, resampled_);
            if (!emit(std::span<const float>(resampled_.data(), m), false)) return false;
            if (last) {
                const std::size_t t = resampler_->process({}, tail_, true);
                if (!emit(std::span<const float>(tail_.data(), t), true)) return false;
            }
        }
        return true;
    }

  private:
    dsp::MlsaVocoder vocoder_;
    NoiseSource noise_source_;
    std::optional<dsp::StreamingResampler> resampler_;
    std::vector<double> samples_;
    std::vector<float> floats_, noise_, resampled_, tail_;
};

}  // namespace etude::engine
