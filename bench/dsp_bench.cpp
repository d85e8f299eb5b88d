// Benchmarks for the dsp layer. main() comes from bench/main.cpp.
#include <benchmark/benchmark.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "dsp/fft.h"
#include "dsp/mel_filterbank.h"
#include "dsp/resampler.h"
#include "dsp/stft.h"
#include "dsp/window.h"

namespace {

using namespace etude::dsp;

std::vector<float> noise(std::size_t n) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    return x;
}

void BM_RealFftForward(benchmark::State& state) {
    const auto n = static_cast<std::size_t>(state.range(0));
    RealFft fft(n);
    const auto x = noise(n);
    std::vector<std::complex<float>> out(fft.bins());
    for (auto _ : state) {
        fft.forward(x, out);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RealFftForward)->Arg(512)->Arg(1024)->Arg(2048);

// One hop through analysis and resynthesis: push hop samples, one frame out, hop samples back.
void BM_StftIstftRoundTripPerHop(benchmark::State& state) {
    const auto n_fft = static_cast<std::size_t>(state.range(0));
    const auto hop = static_cast<std::size_t>(state.range(1));
    const auto window = make_window(WindowType::Hann, n_fft);
    StftStream stft(n_fft, hop, window);
    IstftStream istft(n_fft, hop, window);
    const auto x = noise(hop);
    std::vector<float> y(hop);
    for (auto _ : state) {
        stft.process(
            x, [&](std::span<const std::complex<float>> frame) { istft.push_frame(frame, y); });
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(hop));
}
BENCHMARK(BM_StftIstftRoundTripPerHop)->Args({1024, 256})->Args({512, 128})->Args({400, 100});

void BM_MelFilterbankApply(benchmark::State& state) {
    const MelFilterbank bank(22050.0, 1024, static_cast<std::size_t>(state.range(0)), 0.0, 8000.0);
    auto spectrum = noise(bank.n_bins());
    for (auto& v : spectrum) v = std::abs(v);
    std::vector<float> mel(bank.n_mels());
    for (auto _ : state) {
        bank.apply(spectrum, mel);
        benchmark::DoNotOptimize(mel.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MelFilterbankApply)->Arg(80)->Arg(128);

void BM_Resampler16kTo48kPerBlock(benchmark::State& state) {
    constexpr std::size_t kBlock = 256;
    StreamingResampler r(16000.0, 48000.0, static_cast<ResamplerQuality>(state.range(0)));
    const auto x = noise(kBlock);
    std::vector<float> out(r.max_output_for(kBlock));
    for (auto _ : state) {
        benchmark::DoNotOptimize(r.process(x, out));
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBlock));
}
BENCHMARK(BM_Resampler16kTo48kPerBlock)
    ->Arg(static_cast<int>(ResamplerQuality::SincBest))
    ->Arg(static_cast<int>(ResamplerQuality::SincMedium))
    ->Arg(static_cast<int>(ResamplerQuality::SincFastest));

}  // namespace
