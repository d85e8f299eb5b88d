// The MLSA filter's time-domain response agrees with the spectral envelope
// that the same mel-cepstrum describes (computed independently, in the
// frequency domain, by MelCepstrumEnvelope).
#include "dsp/mlsa_vocoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "dsp/fft.h"
#include "dsp/mel_cepstrum.h"

using namespace etude::dsp;

namespace {

const std::vector<float> kMcep = {0.5f,  0.6f, -0.25f, 0.15f, 0.1f, -0.05f, 0.04f, 0.02f, -0.02f,
                                  0.01f, 0.0f, 0.0f,   0.0f,  0.0f, 0.0f,   0.0f,  0.0f,  0.0f,
                                  0.0f,  0.0f, 0.0f,   0.0f,  0.0f, 0.0f,   0.0f};

std::vector<double> impulse_response(MlsaConfig cfg, std::size_t frames) {
    MlsaVocoder v(cfg);
    std::vector<float> noise(cfg.frame_period, 0.0f);
    std::vector<double> out, block(cfg.frame_period);
    v.synthesize_frame(0.0, kMcep, {}, noise, block);  // primes, no output
    for (std::size_t f = 0; f < frames; ++f) {
        std::fill(noise.begin(), noise.end(), 0.0f);
        if (f == 0) noise[0] = 1.0f;  // unvoiced excitation = one unit impulse
        const auto n = v.synthesize_frame(0.0, kMcep, {}, noise, block);
        out.insert(out.end(), block.begin(), block.begin() + n);
    }
    return out;
}

}  // namespace

TEST(MlsaVocoder, filter_response_matches_the_mel_cepstral_envelope) {
    MlsaConfig cfg;
    cfg.beta = 0.0;  // no postfilter: the filter is exactly the envelope
    cfg.gain = 1.0;
    const std::size_t n_fft = 1024;
    const auto h = impulse_response(cfg, n_fft / cfg.frame_period + 1);
    ASSERT_GE(h.size(), n_fft);

    RealFft fft(n_fft);
    std::vector<float> in(h.begin(), h.begin() + n_fft);
    std::vector<std::complex<float>> spec(fft.bins());
    fft.forward(in, spec);

    MelCepstrumEnvelope env(kMcep.size(), cfg.alpha, n_fft);
    std::vector<float> log_amp(env.n_bins());
    env.log_amplitude(kMcep, log_amp);

    double worst_db = 0;
    for (std::size_t k = 0; k < fft.bins(); ++k) {
        const double ours_db = 20.0 * std::log10(std::abs(spec[k]));
        const double env_db = 20.0 * log_amp[k] / std::log(10.0);
        worst_db = std::max(worst_db, std::abs(ours_db - env_db));
    }
    // The 5th-order Pade approximation of exp() is accurate to well under 0.1 dB
    // for coefficients of this size.
    EXPECT_LT(worst_db, 0.1);
}

TEST(MlsaVocoder, first_frame_primes_and_later_frames_yield_one_period) {
    MlsaConfig cfg;
    MlsaVocoder v(cfg);
    std::vector<float> noise(cfg.frame_period, 1.0f);
    std::vector<double> block(cfg.frame_period);
    EXPECT_EQ(v.synthesize_frame(120.0, kMcep, {}, noise, block), 0u);
    EXPECT_EQ(v.synthesize_frame(120.0, kMcep, {}, noise, block), cfg.frame_period);
    v.reset();
    EXPECT_EQ(v.synthesize_frame(120.0, kMcep, {}, noise, block), 0u);
}

TEST(MlsaVocoder, voiced_frames_pulse_at_the_pitch_period) {
    MlsaConfig cfg;
    cfg.beta = 0.0;
    MlsaVocoder v(cfg);
    std::vector<float> noise(cfg.frame_period, 0.0f);
    std::vector<double> block(cfg.frame_period), out;
    const double f0 = 200.0;  // 80-sample period at 16 kHz
    v.synthesize_frame(f0, kMcep, {}, noise, block);
    for (int f = 0; f < 20; ++f) {
        const auto n = v.synthesize_frame(f0, kMcep, {}, noise, block);
        out.insert(out.end(), block.begin(), block.begin() + n);
    }
    // Autocorrelation peaks at the pitch period.
    auto ac = [&](std::size_t lag) {
        double s = 0;
        for (std::size_t i = 0; i + lag < out.size(); ++i) s += out[i] * out[i + lag];
        return s;
    };
    std::size_t best = 40;
    for (std::size_t lag = 40; lag < 160; ++lag)
        if (ac(lag) > ac(best)) best = lag;
    EXPECT_EQ(best, 80u);
}

TEST(MlsaVocoder, rejects_inconsistent_band_filters) {
    MlsaConfig cfg;
    cfg.band_filters = {{1.0, 0.5}, {1.0}};
    EXPECT_THROW(MlsaVocoder{cfg}, std::invalid_argument);
    cfg = MlsaConfig{};
    cfg.alpha = 1.0;
    EXPECT_THROW(MlsaVocoder{cfg}, std::invalid_argument);
}

TEST(MelCepstrum, warping_there_and_back_recovers_the_cepstrum) {
    const std::vector<double> c = {0.3, 0.5, -0.2, 0.1, 0.05};
    std::vector<double> warped(60), back(5);
    warp_cepstrum(c, 0.42, warped);
    warp_cepstrum(warped, -0.42, back);
    for (std::size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(back[i], c[i], 1e-6) << i;
}

TEST(MelCepstrum, envelope_equals_the_cosine_series_of_the_linear_cepstrum) {
    // Independent route: warp the mel-cepstrum back to a linear-frequency
    // cepstrum by the recursive all-pass transform, then evaluate its plain
    // cosine series log|H(w)| = sum_n c_n cos(n w).
    const double alpha = 0.42;
    std::vector<double> mc(kMcep.begin(), kMcep.end());
    std::vector<double> lin(400);
    warp_cepstrum(mc, -alpha, lin);
    MelCepstrumEnvelope env(kMcep.size(), alpha, 512);
    std::vector<float> log_amp(env.n_bins());
    env.log_amplitude(kMcep, log_amp);
    for (std::size_t k = 0; k < env.n_bins(); k += 16) {
        const double w = M_PI * k / (env.n_bins() - 1);
        double s = 0;
        for (std::size_t n = 0; n < lin.size(); ++n) s += lin[n] * std::cos(n * w);
        EXPECT_NEAR(log_amp[k], s, 1e-3) << k;
    }
}
