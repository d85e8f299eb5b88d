// Spectral vocoder throughput per device: many streams rendered together,
// reported as the number of concurrent real-time streams (5 ms frames) one
// device sustains.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/models/spectral_vocoder.h"
#include "gpu/registry.h"

namespace {

void BM_SpectralStreams(benchmark::State& state, const char* backend_kind) {
    std::shared_ptr<etude::gpu::Backend> backend;
    try {
        backend = etude::gpu::DeviceRegistry::instance().open({backend_kind, -1});
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    const int streams = static_cast<int>(state.range(0));
    const int frames = 8;  // per stream per call: 40 ms of audio
    etude::gpu::SpectralVocoderConfig cfg;
    // One launch for all streams' frames (up to 8192 segments).
    const int batch = std::min(8192, streams * frames + 1);
    etude::gpu::SpectralVocoder vocoder(backend, cfg, batch);
    std::vector<etude::gpu::SpectralStreamState> states(static_cast<std::size_t>(streams),
                                                        etude::gpu::SpectralStreamState(cfg));
    std::vector<float> f0(frames, 120.0f), mcep(static_cast<std::size_t>(frames * cfg.order), 0.0f),
        strengths(static_cast<std::size_t>(frames * cfg.bands), 0.6f);
    for (int t = 0; t < frames; ++t) mcep[static_cast<std::size_t>(t * cfg.order)] = 5.0f;
    std::vector<std::vector<float>> outs(static_cast<std::size_t>(streams));
    std::vector<etude::gpu::SpectralRequest> requests;
    for (int s = 0; s < streams; ++s)
        requests.push_back({&states[static_cast<std::size_t>(s)], f0, mcep, strengths, false,
                            &outs[static_cast<std::size_t>(s)]});
    vocoder.warm_up(batch);
    for (auto _ : state) {
        for (auto& o : outs) o.clear();
        vocoder.render(requests);
    }
    const double frames_done = static_cast<double>(state.iterations()) * streams * frames;
    state.counters["frames_per_s"] = benchmark::Counter(frames_done, benchmark::Counter::kIsRate);
    // A real-time stream needs 200 frames per second.
    state.counters["realtime_streams"] =
        benchmark::Counter(frames_done / 200.0, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_SpectralStreams, cpu, "cpu")->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
// Each batch size is a clFFT plan to bake (seconds on PoCL): few sizes here.
BENCHMARK_CAPTURE(BM_SpectralStreams, opencl, "opencl")->Arg(1)->Arg(8)->UseRealTime();
BENCHMARK_CAPTURE(BM_SpectralStreams, vulkan, "vulkan")->Arg(1)->Arg(8)->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_SpectralStreams, cuda, "cuda")
    ->Arg(1)
    ->Arg(32)
    ->Arg(256)
    ->Arg(1024)
    ->UseRealTime();

}  // namespace
