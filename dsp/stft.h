// Streaming short-time Fourier transform and its weighted overlap-add inverse.
//
// Ownership: each stream owns its window copy, RealFft and buffers, all allocated in the
// constructor (not real-time safe). After that, push/pop/process/push_frame/drain/reset never
// allocate and never lock, so they are real-time safe. Threading: a stream object must not be
// used by two threads at once; distinct objects are independent.
//
// Frame convention: frame t of a stream is the DFT (bins 0..n_fft/2, unnormalised, see
// RealFft) of window[i] * s[t * hop + i], i in [0, n_fft), where s is the pushed signal, after
// n_fft - hop zeros when the stream is StftStart::ZeroPrimed.
//
// Latency: both ends together hold back latency() == n_fft - hop samples. With a ZeroPrimed
// StftStream feeding an IstftStream, every hop samples pushed give one frame and every frame
// gives hop samples back, and the output is exactly the input delayed by n_fft - hop samples
// (the first n_fft - hop outputs are the primed silence): out[m + n_fft - hop] == in[m].
#pragma once

#include <complex>
#include <cstddef>
#include <span>
#include <vector>

#include "dsp/fft.h"

namespace etude::dsp {

enum class StftStart {
    // n_fft - hop zeros precede the signal: the first frame is ready after hop samples, and
    // analysis/resynthesis delays the signal by exactly n_fft - hop samples.
    ZeroPrimed,
    // The first frame is the first n_fft samples, like stft_offline(center = false) and
    // torch.stft(center=False); it is ready after n_fft samples.
    Immediate,
};

class StftStream {
  public:
    // window: n_fft values, copied. Throws std::invalid_argument unless n_fft >= 2,
    // 1 <= hop <= n_fft and window.size() == n_fft.
    StftStream(std::size_t n_fft, std::size_t hop, std::span<const float> window,
               StftStart start = StftStart::ZeroPrimed);

    std::size_t n_fft() const { return n_fft_; }
    std::size_t hop() const { return hop_; }
    std::size_t bins() const { return n_fft_ / 2 + 1; }
    std::size_t latency() const { return n_fft_ - hop_; }

    // Buffers samples from the front of `in` and returns how many it took. It stops as soon
    // as a frame is complete (so it takes nothing while frame_ready()); read the frame with
    // pop_frame() and push the rest of `in` again.
    std::size_t push(std::span<const float> in);
    bool frame_ready() const { return filled_ == n_fft_; }
    // If a frame is ready, writes its bins() values to `out`, advances by hop and returns
    // true; otherwise leaves `out` alone and returns false.
    bool pop_frame(std::span<std::complex<float>> out);

    // Convenience over push/pop_frame: consumes all of `in` and calls
    // on_frame(std::span<const std::complex<float>>) for every frame completed, in order.
    // The span points into the stream and is valid only during the call.
    template <class OnFrame>
    void process(std::span<const float> in, OnFrame&& on_frame) {
        while (!in.empty() || frame_ready()) {
            in = in.subspan(push(in));
            if (pop_frame(frame_)) on_frame(std::span<const std::complex<float>>(frame_));
        }
    }

    // Forgets all pushed samples and returns to the freshly constructed state.
    void reset();

  private:
    std::size_t n_fft_;
    std::size_t hop_;
    StftStart start_;
    std::vector<float> window_;
    std::vector<float> buffer_;    // the next frame's samples; filled_ of them are valid
    std::vector<float> windowed_;  // scratch for the FFT input
    std::vector<std::complex<float>> frame_;
    std::size_t filled_ = 0;
    RealFft fft_;
};

class IstftStream {
  public:
    // window: the synthesis window, n_fft values, copied. Output is normalised by the
    // steady-state sum of squared windows at each position, which is exact for frames made
    // with the same window whenever that sum is nonzero (any window with enough overlap, e.g.
    // Hann with hop <= n_fft / 2). The stream is treated as preceded and followed by silent
    // frames, so the first and last n_fft - hop samples fade in and out unless the signal
    // there was silence (as it is with StftStart::ZeroPrimed). Positions whose sum is zero
    // (e.g. periodic Hann with hop == n_fft) come out as 0. Throws std::invalid_argument
    // unless n_fft >= 2, 1 <= hop <= n_fft and window.size() == n_fft.
    IstftStream(std::size_t n_fft, std::size_t hop, std::span<const float> window);

    std::size_t n_fft() const { return n_fft_; }
    std::size_t hop() const { return hop_; }
    std::size_t bins() const { return n_fft_ / 2 + 1; }
    std::size_t latency() const { return n_fft_ - hop_; }

    // Overlap-adds one frame (bins() values) and writes the hop() samples that no later frame
    // can touch any more to `out` (which must hold hop() samples).
    void push_frame(std::span<const std::complex<float>> frame, std::span<float> out);
    // Ends the stream: writes the latency() samples still being overlapped to `out` (which
    // must hold latency() samples), returns latency() and resets.
    std::size_t drain(std::span<float> out);
    void reset();

  private:
    std::size_t n_fft_;
    std::size_t hop_;
    std::vector<float> window_;
    std::vector<float> inv_norm_;  // 1 / steady-state sum of squared windows, per position mod hop
    std::vector<float> accum_;     // overlap-add accumulator, n_fft samples
    std::vector<float> time_;      // scratch for the inverse FFT output
    RealFft fft_;
};

// Whole-signal STFT, one vector of n_fft/2+1 bins per frame. center = false: frame t starts
// at sample t * hop and there are 1 + (size - n_fft) / hop frames (none if the signal is
// shorter than n_fft). center = true: the signal is first padded by n_fft / 2 samples on both
// sides by reflection (like torch.stft(center=True, pad_mode="reflect") and librosa's
// pad_mode="reflect"), so frame t is centred on sample t * hop. Allocates; not real-time safe.
std::vector<std::vector<std::complex<float>>> stft_offline(std::span<const float> signal,
                                                           std::size_t n_fft, std::size_t hop,
                                                           std::span<const float> window,
                                                           bool center);

}  // namespace etude::dsp
