#include "engine/models/spectral_vocoder.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "dsp/mel_cepstrum.h"
#include "gpu/memory_pool.h"

namespace etude::gpu {
namespace {

float next_noise(std::uint32_t& s) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return (s & 0x80000000u) ? 1.0f : -1.0f;
}

}  // namespace

SpectralStreamState::SpectralStreamState(const SpectralVocoderConfig& c)
    : prev_pulse(static_cast<std::size_t>(c.frame_period), 0.0f),
      prev_noise(static_cast<std::size_t>(c.frame_period), 0.0f),
      prev_mcep(static_cast<std::size_t>(c.order), 0.0f),
      prev_strengths(static_cast<std::size_t>(c.bands), 0.0f),
      accumulator(static_cast<std::size_t>(c.n_fft), 0.0) {}

void SpectralStreamState::reset() {
    frames_seen = 0;
    phase = 0.0;
    rng = 0x9E3779B9u;
    std::fill(prev_pulse.begin(), prev_pulse.end(), 0.0f);
    std::fill(prev_noise.begin(), prev_noise.end(), 0.0f);
    std::fill(accumulator.begin(), accumulator.end(), 0.0);
}

SpectralVocoder::SpectralVocoder(std::shared_ptr<Backend> backend, SpectralVocoderConfig config,
                                 int max_segments_per_call, MemoryPool* pool)
    : backend_(std::move(backend)),
      config_(config),
      max_segments_(std::max(1, max_segments_per_call)),
      bins_(config.n_fft / 2 + 1) {
    const int hop = config_.frame_period, n = config_.n_fft;
    if (n < 2 * hop || (n & (n - 1)) != 0)
        throw std::invalid_argument("spectral vocoder: n_fft must be a power of two >= 2 * hop");
    Backend& b = *backend_;
    auto alloc = [&](std::size_t floats, const char* tag) {
        return pool ? pool->allocate(floats, tag) : b.allocate(floats, tag);
    };
    auto setup = b.create_queue();
    const std::size_t S = static_cast<std::size_t>(max_segments_),
                      B = static_cast<std::size_t>(bins_), N = static_cast<std::size_t>(n);

    // Envelope basis in complex layout (imaginary parts zero), so the GEMM
    // writes log-amplitudes straight into an irfft-ready spectrum.
    dsp::MelCepstrumEnvelope env(static_cast<std::size_t>(config_.order), config_.alpha,
                                 static_cast<std::size_t>(n));
    host_basis_ = env.basis();
    std::vector<float> basis(static_cast<std::size_t>(config_.order) * 2 * B, 0.0f);
    for (std::size_t k = 0; k < B; ++k)
        for (int m = 0; m < config_.order; ++m)
            basis[static_cast<std::size_t>(m) * 2 * B + 2 * k] = env.basis()[k * config_.order + m];
    // Band weights (complex layout): 1 inside the band, 0 outside.
    const double nyquist = config_.sample_rate / 2.0;
    const double edges_8k[] = {0, 1000, 2000, 4000, 6000, 8000};
    std::vector<float> bands(static_cast<std::size_t>(config_.bands) * 2 * B, 0.0f);
    for (std::size_t k = 0; k < B; ++k) {
        const double hz = nyquist * static_cast<double>(k) / static_cast<double>(B - 1);
        const double scaled = hz * 8000.0 / nyquist;
        int band = config_.bands - 1;
        for (int i = 0; i < config_.bands && i < 5; ++i)
            if (scaled < edges_8k[i + 1]) {
                band = i;
                break;
            }
        bands[static_cast<std::size_t>(band) * 2 * B + 2 * k] = 1.0f;
    }
    basis_ = alloc(basis.size(), "spectral.basis");
    bands_ = alloc(bands.size(), "spectral.bands");
    b.copy_to_device(*setup, basis_, 0, basis.data(), basis.size());
    b.copy_to_device(*setup, bands_, 0, bands.data(), bands.size());
    const float one = 1.0f;
    one_ = alloc(1, "spectral.one");
    b.copy_to_device(*setup, one_, 0, &one, 1);
    b.synchronize(*setup);

    for (Slot& sl : slots_) {
        sl.queue = b.create_queue();
        sl.mcep = alloc(S * static_cast<std::size_t>(config_.order), "spectral.mcep");
        sl.strengths = alloc(S * static_cast<std::size_t>(config_.bands), "spectral.strengths");
        sl.strengths_c = alloc(S * static_cast<std::size_t>(config_.bands), "spectral.strengths");
        sl.logenv = alloc(S * 2 * B, "spectral.envelope");
        sl.cep = alloc(S * N, "spectral.cepstrum");
        sl.folded = alloc(S * N, "spectral.cepstrum");
        sl.h = alloc(S * 2 * B, "spectral.filter");
        sl.vp = alloc(S * 2 * B, "spectral.mix");
        sl.vn = alloc(S * 2 * B, "spectral.mix");
        sl.exc = alloc(S * N, "spectral.excitation");
        sl.exc_noise = alloc(S * N, "spectral.excitation");
        sl.exc_spec = alloc(S * 2 * B, "spectral.excitation");
        sl.exc_noise_spec = alloc(S * 2 * B, "spectral.excitation");
        sl.y = alloc(S * N, "spectral.output");
        sl.host_mcep.resize(S * static_cast<std::size_t>(config_.order));
        sl.host_strength.resize(S * static_cast<std::size_t>(config_.bands));
        sl.host_strength_c.resize(sl.host_strength.size());
        sl.host_exc.resize(S * N);
        sl.host_noise.resize(S * N);
        sl.host_y.resize(S * N);
    }
    // Periodic Hann over two hops: copies a hop apart sum to exactly one.
    window_.resize(static_cast<std::size_t>(2 * hop));
    for (int i = 0; i < 2 * hop; ++i)
        window_[static_cast<std::size_t>(i)] =
            static_cast<float>(0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * i / (2.0 * hop)));
}

// The same formant emphasis as the MLSA vocoder's postfilter: higher
// cepstral terms scaled by (1 + beta), with c0 corrected so the envelope's
// energy is unchanged.
void SpectralVocoder::postfilter(std::span<const float> mc, std::span<float> out) {
    std::copy(mc.begin(), mc.end(), out.begin());
    if (config_.beta <= 0.0) return;
    const int order = config_.order;
    for (int m = 2; m < order; ++m)
        out[static_cast<std::size_t>(m)] *= static_cast<float>(1.0 + config_.beta);
    double before = 0, after = 0;
    for (int k = 0; k < bins_; ++k) {
        double la = 0, lb = 0;
        const float* row = host_basis_.data() + static_cast<std::size_t>(k) * order;
        for (int m = 0; m < order; ++m) {
            la += row[m] * mc[static_cast<std::size_t>(m)];
            lb += row[m] * out[static_cast<std::size_t>(m)];
        }
        before += std::exp(2 * la);
        after += std::exp(2 * lb);
    }
    out[0] += static_cast<float>(0.5 * std::log(before / after));
}

void SpectralVocoder::render(std::span<SpectralRequest> requests) {
    const int hop = config_.frame_period, N = config_.n_fft, order = config_.order,
              nb = config_.bands;
    auto stage = [&](SpectralStreamState& st, std::vector<float>* out, std::span<const float> mcep,
                     std::span<const float> strengths, const float* pulse, const float* noise,
                     bool flush) {
        if (static_cast<int>(slots_[current_].segs.size()) == max_segments_) {
            submit(slots_[current_]);
            current_ ^= 1;
        }
        Slot& sl = slots_[current_];
        if (sl.in_flight) finish(sl);  // the older batch: overlap-add it first
        const std::size_t i = sl.segs.size();
        postfilter(mcep,
                   std::span(sl.host_mcep).subspan(i * order, static_cast<std::size_t>(order)));
        for (int k = 0; k < nb; ++k) {
            sl.host_strength[i * nb + k] = strengths[static_cast<std::size_t>(k)];
            sl.host_strength_c[i * nb + k] = 1.0f - strengths[static_cast<std::size_t>(k)];
        }
        float* p = sl.host_exc.data() + i * N;
        float* q = sl.host_noise.data() + i * N;
        std::fill(p, p + N, 0.0f);
        std::fill(q, q + N, 0.0f);
        for (int s = 0; s < hop; ++s) {
            p[s] =
                st.prev_pulse[static_cast<std::size_t>(s)] * window_[static_cast<std::size_t>(s)];
            q[s] =
                st.prev_noise[static_cast<std::size_t>(s)] * window_[static_cast<std::size_t>(s)];
            p[hop + s] = pulse[s] * window_[static_cast<std::size_t>(hop + s)];
            q[hop + s] = noise[s] * window_[static_cast<std::size_t>(hop + s)];
        }
        // Segment j covers the hop before frame j and frame j's own hop.
        sl.segs.push_back({&st, out, flush, st.frames_seen - 1});
    };

    std::vector<float> pulse(static_cast<std::size_t>(hop)), noise(static_cast<std::size_t>(hop));
    for (auto& r : requests) {
        SpectralStreamState& st = *r.state;
        const std::size_t frames = r.f0.size();
        for (std::size_t t = 0; t < frames; ++t) {
            // Excitation for this frame's hop: a pulse train at its F0
            // (amplitude sqrt(period), as the MLSA vocoder), and +-1 noise.
            const double f0 = r.f0[t];
            const double period = f0 > 0 ? config_.sample_rate / f0 : 0.0;
            for (int s = 0; s < hop; ++s) {
                float pv = 0.0f;
                if (period > 0) {
                    st.phase += 1.0;
                    if (st.phase >= period) {
                        pv = static_cast<float>(std::sqrt(period));
                        st.phase -= period;
                    }
                } else {
                    st.phase = 0.0;
                }
                pulse[static_cast<std::size_t>(s)] = pv;
                noise[static_cast<std::size_t>(s)] = next_noise(st.rng);
            }
            auto mc = r.mcep.subspan(t * order, static_cast<std::size_t>(order));
            auto sv = r.strengths.subspan(t * nb, static_cast<std::size_t>(nb));
            if (st.frames_seen > 0) {
                // Segment for the previous frame: its hop and this one.
                stage(st, r.out, st.prev_mcep, st.prev_strengths, pulse.data(), noise.data(),
                      false);
            }
            std::copy(pulse.begin(), pulse.end(), st.prev_pulse.begin());
            std::copy(noise.begin(), noise.end(), st.prev_noise.begin());
            std::copy(mc.begin(), mc.end(), st.prev_mcep.begin());
            std::copy(sv.begin(), sv.end(), st.prev_strengths.begin());
            ++st.frames_seen;
        }
        if (r.last && st.frames_seen > 0) {
            // The last frame's segment, with silence after it; then the
            // stream starts afresh (its accumulator is cleared once this
            // segment has been added and emitted).
            std::fill(pulse.begin(), pulse.end(), 0.0f);
            std::fill(noise.begin(), noise.end(), 0.0f);
            stage(st, r.out, st.prev_mcep, st.prev_strengths, pulse.data(), noise.data(), true);
            st.frames_seen = 0;
            st.phase = 0.0;
            st.rng = 0x9E3779B9u;
            std::fill(st.prev_pulse.begin(), st.prev_pulse.end(), 0.0f);
            std::fill(st.prev_noise.begin(), st.prev_noise.end(), 0.0f);
        }
    }
    // Submit what is staged, then finish both batches in submission order.
    Slot& cur = slots_[current_];
    Slot& older = slots_[current_ ^ 1];
    if (!cur.segs.empty() && !cur.in_flight) submit(cur);
    if (older.in_flight) finish(older);
    if (cur.in_flight) finish(cur);
}

// Device work runs on a power-of-two number of segments (unused rows are
// zero): FFT plans are per batch size, and on some devices (clFFT on PoCL)
// making a plan takes seconds, so only a few sizes may ever be needed, and
// warm_up() makes them all ahead of time, on both slots' queues.
static int device_batch(int segments, int max_segments) {
    int s = 1;
    while (s < segments) s *= 2;
    return std::min(s, max_segments);
}

void SpectralVocoder::warm_up(int max_batch) {
    for (int s = 1; s <= std::min(max_batch, max_segments_); s *= 2)
        for (Slot& sl : slots_) {
            run_device(sl, s);
            backend_->synchronize(*sl.queue);
        }
}

void SpectralVocoder::submit(Slot& sl) {
    const int S = static_cast<int>(sl.segs.size());
    const int SD = device_batch(S, max_segments_);
    // Zero the padding rows so they compute nothing harmful.
    const long N = config_.n_fft, order = config_.order, nb = config_.bands;
    std::fill(sl.host_mcep.begin() + S * order, sl.host_mcep.begin() + SD * order, 0.0f);
    std::fill(sl.host_strength.begin() + S * nb, sl.host_strength.begin() + SD * nb, 0.0f);
    std::fill(sl.host_strength_c.begin() + S * nb, sl.host_strength_c.begin() + SD * nb, 0.0f);
    std::fill(sl.host_exc.begin() + S * N, sl.host_exc.begin() + SD * N, 0.0f);
    std::fill(sl.host_noise.begin() + S * N, sl.host_noise.begin() + SD * N, 0.0f);
    run_device(sl, SD);
    sl.in_flight = true;
}

void SpectralVocoder::run_device(Slot& sl, int S) {
    Backend& b = *backend_;
    Queue& q = *sl.queue;
    const int N = config_.n_fft, B = bins_, order = config_.order, nb = config_.bands;

    b.copy_to_device(q, sl.mcep, 0, sl.host_mcep.data(), static_cast<std::size_t>(S * order));
    b.copy_to_device(q, sl.strengths, 0, sl.host_strength.data(), static_cast<std::size_t>(S * nb));
    b.copy_to_device(q, sl.strengths_c, 0, sl.host_strength_c.data(),
                     static_cast<std::size_t>(S * nb));
    b.copy_to_device(q, sl.exc, 0, sl.host_exc.data(), static_cast<std::size_t>(S) * N);
    b.copy_to_device(q, sl.exc_noise, 0, sl.host_noise.data(), static_cast<std::size_t>(S) * N);

    // Minimum-phase filter per segment from its envelope.
    b.gemm(q, false, false, S, 2 * B, order, 1.0f, sl.mcep, order, basis_, 2 * B, 0.0f, sl.logenv,
           2 * B);
    b.irfft(q, N, S, sl.logenv, sl.cep);
    b.minimum_phase_fold(q, N, S, sl.cep, sl.folded);
    b.rfft(q, N, S, sl.folded, sl.h);
    b.complex_exp(q, sl.h, sl.h, static_cast<std::size_t>(S) * B);
    // Mixed excitation: band-weighted pulse plus complementary noise.
    b.rfft(q, N, S, sl.exc, sl.exc_spec);
    b.rfft(q, N, S, sl.exc_noise, sl.exc_noise_spec);
    b.gemm(q, false, false, S, 2 * B, nb, 1.0f, sl.strengths, nb, bands_, 2 * B, 0.0f, sl.vp,
           2 * B);
    b.gemm(q, false, false, S, 2 * B, nb, 1.0f, sl.strengths_c, nb, bands_, 2 * B, 0.0f, sl.vn,
           2 * B);
    b.complex_multiply(q, sl.exc_spec, sl.vp, sl.vp, static_cast<std::size_t>(S) * B);
    b.complex_multiply(q, sl.exc_noise_spec, sl.vn, sl.vn, static_cast<std::size_t>(S) * B);
    // vp += vn, as a rank-1 GEMM (C = 1 * one * vn + 1 * C).
    const int len = S * 2 * B;
    b.gemm(q, false, false, 1, len, 1, 1.0f, one_, 1, sl.vn, len, 1.0f, sl.vp, len);
    b.complex_multiply(q, sl.h, sl.vp, sl.vp, static_cast<std::size_t>(S) * B);
    b.irfft(q, N, S, sl.vp, sl.y);
    b.copy_to_host(q, sl.host_y.data(), sl.y, 0, static_cast<std::size_t>(S) * N);
}

// Overlap-add on the host, in frame order, so the sums do not depend on how
// frames were batched. The accumulator starts at the segment's first sample;
// after adding segment j its first hop is final.
void SpectralVocoder::finish(Slot& sl) {
    backend_->synchronize(*sl.queue);
    const int N = config_.n_fft, hop = config_.frame_period;
    const double scale = config_.gain / 32768.0;
    for (std::size_t i = 0; i < sl.segs.size(); ++i) {
        Segment& s = sl.segs[i];
        auto& acc = s.state->accumulator;
        const float* y = sl.host_y.data() + i * static_cast<std::size_t>(N);
        for (int k = 0; k < N; ++k) acc[static_cast<std::size_t>(k)] += y[k] * scale;
        // Segment 0 starts a hop before time zero: that hop is not output.
        if (s.index >= 1)
            for (int k = 0; k < hop; ++k)
                s.out->push_back(
                    static_cast<float>(std::clamp(acc[static_cast<std::size_t>(k)], -1.0, 1.0)));
        std::copy(acc.begin() + hop, acc.end(), acc.begin());
        std::fill(acc.end() - hop, acc.end(), 0.0);
        if (s.flush) std::fill(acc.begin(), acc.end(), 0.0);
    }
    sl.segs.clear();
    sl.in_flight = false;
}

}  // namespace etude::gpu
