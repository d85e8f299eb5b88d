// A frame-parallel spectral vocoder for the embedded voices' parameters
// (F0, mel-cepstrum, band voicing strengths), built from backend operations
// so that it runs unchanged on the CPU, OpenCL and CUDA backends, and batches
// many frames of many streams into one set of launches.
//
// Per analysis segment j (centred on frame j, two hops long):
//   envelope   log|H_j(w)| = sum_m c_m cos(m beta(w))   (one GEMM for all segments)
//   min phase  cepstrum = irfft(log|H|); fold; H_j = exp(rfft(folded))
//   excitation pulse and noise segments (Hann-windowed, made on the host,
//              where the pitch phase runs sequentially), rfft both, weight
//              them per band by the voicing strengths (pulse) and their
//              complement (noise), add
//   output     y_j = irfft(H_j * E_j), overlap-added on the host in frame
//              order (so the sum is the same however frames are batched).
// It sounds like the MLSA vocoder (same envelope, same mixed excitation) but
// is not sample-identical to it; docs/benchmarks.md reports the log-spectral
// distance between the two.
//
// Threads: one SpectralVocoder per thread (it owns a queue and buffers);
// SpectralStreamState belongs to one stream. Not real-time safe (device
// calls); runs on compute workers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "gpu/backend.h"

namespace etude::gpu {

struct SpectralVocoderConfig {
    double sample_rate = 16000.0;
    int frame_period = 80;  // hop, samples
    int n_fft = 512;        // segment transform size (>= 2 * hop + the filter's tail)
    int order = 25;         // mel-cepstral coefficients per frame
    double alpha = 0.42;
    double gain = 1.5;
    double beta = 0.4;  // postfilter (formant emphasis), as the MLSA vocoder's
    int bands = 5;      // voicing-strength bands: 0-1, 1-2, 2-4, 4-6, 6-8 kHz (scaled to Nyquist)
};

// Host-side state of one stream between calls: pitch phase, noise generator,
// the excitation of the previous hop, and the overlap-add accumulator.
class SpectralStreamState {
  public:
    explicit SpectralStreamState(const SpectralVocoderConfig& c);
    void reset();

  private:
    friend class SpectralVocoder;
    std::int64_t frames_seen = 0;  // frames received in the current utterance
    double phase = 0.0;            // samples since the last pulse
    std::uint32_t rng = 0x9E3779B9u;
    std::vector<float> prev_pulse, prev_noise;  // the last hop of excitation
    std::vector<float> prev_mcep, prev_strengths;
    std::vector<double> accumulator;  // overlap-add, starting at the next sample to emit
};

struct SpectralRequest {
    SpectralStreamState* state;
    std::span<const float> f0;         // frames
    std::span<const float> mcep;       // frames * order
    std::span<const float> strengths;  // frames * bands
    bool last = false;                 // the utterance ends with these frames
    std::vector<float>* out;           // samples are appended (float, [-1, 1))
};

class SpectralVocoder {
  public:
    // With a pool, device buffers come from (and go back to) it, so a
    // rebuilt vocoder reuses them and out-of-memory trims it before failing.
    SpectralVocoder(std::shared_ptr<Backend> backend, SpectralVocoderConfig config,
                    int max_segments_per_call = 256, class MemoryPool* pool = nullptr);
    const SpectralVocoderConfig& config() const { return config_; }
    Backend& backend() { return *backend_; }

    // Processes every request's frames in as few device launches as
    // possible. For each utterance it emits (frames - 1) * hop samples in
    // total, like the MLSA vocoder: the first frame primes, and the last call
    // (last = true) flushes.
    void render(std::span<SpectralRequest> requests);

    // Runs the device pipeline once for every batch size up to `max_batch`
    // segments, so plans (FFT) are made now, not on the first block.
    void warm_up(int max_batch);

  private:
    struct Segment {
        SpectralStreamState* state;
        std::vector<float>* out;
        bool flush;          // the final segment of an utterance
        std::int64_t index;  // segment number within the utterance
    };
    // Double buffering: two sets of buffers, each with its own queue. While
    // one batch computes (copy in, kernels, copy out on its queue), the host
    // stages the next into the other; results are overlap-added in the order
    // the batches were submitted.
    struct Slot {
        std::unique_ptr<Queue> queue;
        DeviceBuffer mcep, vp, vn, strengths, strengths_c, logenv, cep, folded, h;
        DeviceBuffer exc, exc_noise, exc_spec, exc_noise_spec, y;
        std::vector<float> host_mcep, host_strength, host_strength_c, host_exc, host_noise, host_y;
        std::vector<Segment> segs;
        bool in_flight = false;
    };
    void submit(Slot& slot);  // pads to a planned batch size and enqueues, without waiting
    void finish(Slot& slot);  // waits, then overlap-adds the slot's segments
    void run_device(Slot& slot, int segments);
    void postfilter(std::span<const float> mcep, std::span<float> out);

    std::shared_ptr<Backend> backend_;
    SpectralVocoderConfig config_;
    int max_segments_;
    int bins_;
    DeviceBuffer basis_, bands_, one_;  // shared, read-only: envelope basis, band weights, 1.0
    Slot slots_[2];
    int current_ = 0;
    std::vector<float> window_;
    std::vector<float> host_basis_;  // n_bins x order, for the postfilter's energy
};

}  // namespace etude::gpu
