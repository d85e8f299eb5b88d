// MLSA vocoder cost per 5 ms frame (80 samples at 16 kHz), with the
// default voice's shape: 25 coefficients, postfilter, 5-band mixed excitation.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "dsp/mlsa_vocoder.h"

namespace {

void BM_MlsaVocoderFrame(benchmark::State& state) {
    etude::dsp::MlsaConfig cfg;
    const bool mixed = state.range(0) != 0;
    if (mixed) {
        // 5 band filters of 47 taps, like the clustergen voices' (values do not matter for cost).
        for (int b = 0; b < 5; ++b) {
            std::vector<double> h(47);
            for (int k = 0; k < 47; ++k) h[k] = std::sin(0.3 * (k + 1) * (b + 1)) / (k + 1);
            cfg.band_filters.push_back(h);
        }
    }
    etude::dsp::MlsaVocoder vocoder(cfg);
    std::vector<float> mcep(25), strengths(5, 0.6f), noise(80);
    for (std::size_t i = 0; i < mcep.size(); ++i) mcep[i] = 0.5f / static_cast<float>(i + 1);
    for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = (i * 7919 % 2) ? 1.0f : -1.0f;
    std::vector<double> out(80);
    double f0 = 120;
    for (auto _ : state) {
        f0 = f0 > 200 ? 120 : f0 + 1;
        mcep[1] = static_cast<float>(0.3 + 0.001 * f0);
        benchmark::DoNotOptimize(vocoder.synthesize_frame(f0, mcep, strengths, noise, out));
    }
    state.SetItemsProcessed(state.iterations() * 80);
    state.counters["x_realtime"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * 0.005, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlsaVocoderFrame)->Arg(0)->Arg(1)->ArgName("mixed");

}  // namespace
