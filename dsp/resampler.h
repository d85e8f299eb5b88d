/// \file
/// Streaming mono sample-rate conversion over libsamplerate's sinc converters.
/// A public header: tools that write a stream's or a vocoder's audio at
/// another rate (`etude vocode --rate`) convert with the engine's own
/// resampler; it depends on nothing of the engine.
///
/// Ownership: a StreamingResampler owns one libsamplerate state (RAII); movable, not
/// copyable. Threading: the constructor allocates (not real-time safe); process() and reset()
/// neither allocate nor lock and are real-time safe. One object must not be used by two
/// threads at once.
///
/// Timing: libsamplerate compensates the filter delay, so output sample m is the input
/// signal at time m / out_rate (input sample 0 is at time 0); a stream of N input samples
/// gives about N * ratio() output samples once flushed with end_of_input.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

// libsamplerate's opaque state (typedef struct SRC_STATE_tag SRC_STATE in samplerate.h).
struct SRC_STATE_tag;

namespace etude::dsp {

/// libsamplerate's sinc converters, best (slowest) first.
enum class ResamplerQuality {
    SincBest,     ///< SRC_SINC_BEST_QUALITY
    SincMedium,   ///< SRC_SINC_MEDIUM_QUALITY, the default
    SincFastest,  ///< SRC_SINC_FASTEST
};

/// One mono signal from one rate to another, piece by piece.
class StreamingResampler {
  public:
    /// Allocates the libsamplerate state; throws std::invalid_argument naming the bad rate
    /// (rates must be finite and > 0, ratio within libsamplerate's 1/256..256).
    StreamingResampler(double in_rate, double out_rate,
                       ResamplerQuality q = ResamplerQuality::SincMedium);

    StreamingResampler(StreamingResampler&&) noexcept = default;             ///< movable
    StreamingResampler& operator=(StreamingResampler&&) noexcept = default;  ///< movable
    StreamingResampler(const StreamingResampler&) = delete;
    StreamingResampler& operator=(const StreamingResampler&) = delete;
    ~StreamingResampler() = default;  ///< frees the libsamplerate state

    double ratio() const { return ratio_; }  ///< out_rate / in_rate

    /// Safe upper bound on what process() can write for in_frames input, including what a
    /// flush (end_of_input) releases from the converter's internal history.
    std::size_t max_output_for(std::size_t in_frames) const;

    /// Consumes all of `in`, writes to `out` (which must hold max_output_for(in.size())
    /// samples) and returns the number of samples written. With end_of_input = true it also
    /// flushes everything left inside the converter and then resets, so the object is ready
    /// for a new stream. No allocation. If `out` is too small anyway, it stops when `out` is
    /// full and the unconsumed input is lost (asserted in debug builds).
    std::size_t process(std::span<const float> in, std::span<float> out, bool end_of_input = false);

    /// Drops all buffered history and starts a new stream.
    void reset();

  private:
    struct StateDeleter {
        void operator()(SRC_STATE_tag* state) const;
    };

    double ratio_;
    std::unique_ptr<SRC_STATE_tag, StateDeleter> state_;
};

}  // namespace etude::dsp
