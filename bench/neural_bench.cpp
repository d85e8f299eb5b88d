// Neural vocoders at full size: real-time factor on each backend, whole
// utterance, and streamed in 32-frame chunks (layer by layer, and with the
// context recomputed per chunk for comparison). The models come from
//   /usr/bin/python3 tools/make_parity_data.py --full-size DIR
// (published channel counts, random weights); set ETUDE_MODELS_DIR=DIR
// (default /tmp/etude_full). tools/bench_pytorch.py times PyTorch on the
// same files for the side-by-side table in docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "audio-io/npy_file.h"
#include "engine/neural_vocoder.h"
#include "gpu/registry.h"

namespace {

using etude::engine::MelVocoderStream;
using etude::engine::NeuralModel;

std::string models_dir() {
    const char* d = std::getenv("ETUDE_MODELS_DIR");
    return d ? d : "/tmp/etude_full";
}

// chunk 0: the whole utterance in one run. Otherwise 32-frame chunks through
// a MelVocoderStream, layer by layer (incremental) or recomputing each
// window's context (as models whose layers cannot stream do).
void run_vocoder(benchmark::State& state, const std::string& name, const std::string& backend,
                 int chunk, bool incremental) {
    const std::string dir = models_dir() + "/";
    if (!std::filesystem::exists(dir + name + ".lef")) {
        state.SkipWithError(
            ("no " + dir + name + ".lef: make it with tools/make_parity_data.py --full-size DIR")
                .c_str());
        return;
    }
    std::shared_ptr<NeuralModel> model;
    try {
        model =
            NeuralModel::load(dir + name + ".lef", etude::engine::open_model_backend(backend, -1));
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return;
    }
    const auto mel = etude::audio_io::read_npy(dir + name + "_mel.npy");
    const int n_mels = static_cast<int>(mel.shape[0]), frames = static_cast<int>(mel.shape[1]);
    std::size_t samples = 0;
    for (auto _ : state) {
        if (chunk <= 0) {
            samples = model->vocode(mel.data, frames).size();
        } else {
            MelVocoderStream stream(model);
            stream.set_incremental(incremental);
            samples = 0;
            std::vector<float> part;
            for (int f0 = 0; f0 < frames; f0 += chunk) {
                const int n = std::min(chunk, frames - f0);
                etude::engine::copy_mel_frames(mel.data, n_mels, frames, f0, n, part);
                samples += stream.push(part, n).size();
            }
            samples += stream.finish().size();
        }
        benchmark::DoNotOptimize(samples);
    }
    const double audio_seconds = static_cast<double>(samples) / model->audio().sample_rate;
    // Real-time factor: seconds of audio made per second of wall time.
    state.counters["rtf"] = benchmark::Counter(
        audio_seconds * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["audio_s"] = audio_seconds;
    state.SetLabel(model->backend().info().name);
}

void register_all() {
    for (const char* name : {"hifigan_v1", "hifigan_v3", "vocos"})
        // OpenCL at full size only on request (ETUDE_BENCH_OPENCL=1): on PoCL,
        // the CPU device here, one V1 utterance takes minutes.
        for (const char* backend : {"cpu", "opencl", "cuda"})
            if (std::string(backend) != "opencl" || std::getenv("ETUDE_BENCH_OPENCL"))
                for (const char* mode : {"whole", "chunk32", "chunk32_recompute"}) {
                    const std::string m = mode;
                    const int chunk = m == "whole" ? 0 : 32;
                    const bool incremental = m == "chunk32";
                    const std::string label =
                        std::string("Neural/") + name + "/" + backend + "/" + mode;
                    benchmark::RegisterBenchmark(label.c_str(),
                                                 [=](benchmark::State& s) {
                                                     run_vocoder(s, name, backend, chunk,
                                                                 incremental);
                                                 })
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime()
                        ->MinTime(2.0);
                }
}

const bool registered = (register_all(), true);

}  // namespace
