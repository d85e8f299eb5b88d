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
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/npy_file.h"
#include "engine/models/mel_vocoder_stream.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/scheduling/device_choice.h"
#include "gpu/registry.h"

namespace {

using etude::engine::MelVocoderStream;
using etude::engine::NeuralModel;

std::string models_dir() {
    const char* d = std::getenv("ETUDE_MODELS_DIR");
    return d ? d : "/tmp/etude_full";
}

std::shared_ptr<NeuralModel> load_or_skip(benchmark::State& state, const std::string& name,
                                          const std::string& backend) {
    const std::string path = models_dir() + "/" + name + ".lef";
    if (!std::filesystem::exists(path)) {
        state.SkipWithError(
            ("no " + path + ": make it with tools/make_parity_data.py --full-size DIR").c_str());
        return nullptr;
    }
    try {
        return NeuralModel::load(path, etude::engine::open_model_backend(backend, -1));
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return nullptr;
    }
}

// One utterance through `stream` in chunks of `chunk` frames; the samples made.
std::size_t stream_utterance(MelVocoderStream& stream, const etude::audio_io::NpyArray& mel,
                             int chunk) {
    const int n_mels = static_cast<int>(mel.shape[0]), frames = static_cast<int>(mel.shape[1]);
    std::size_t samples = 0;
    std::vector<float> part;
    for (int f0 = 0; f0 < frames; f0 += chunk) {
        const int n = std::min(chunk, frames - f0);
        etude::engine::copy_mel_frames(mel.data, n_mels, frames, f0, n, part);
        samples += stream.push(part, n).size();
    }
    return samples + stream.finish().size();
}

// chunk 0: the whole utterance in one run. Otherwise 32-frame chunks through
// a MelVocoderStream, layer by layer (incremental) or recomputing each
// window's context (as models whose layers cannot stream do).
void run_vocoder(benchmark::State& state, const std::string& name, const std::string& backend,
                 int chunk, bool incremental) {
    const auto model = load_or_skip(state, name, backend);
    if (!model) return;
    const auto mel = etude::audio_io::read_npy(models_dir() + "/" + name + "_mel.npy");
    const int frames = static_cast<int>(mel.shape[1]);
    // A stream lives as long as its voice: made (and its layers' state
    // allocated) once; finish() readies it for the next utterance.
    MelVocoderStream stream(model);
    stream.set_incremental(incremental);
    stream.prepare();
    std::size_t samples = 0;
    for (auto _ : state) {
        samples = chunk <= 0 ? model->vocode(mel.data, frames).size()
                             : stream_utterance(stream, mel, chunk);
        benchmark::DoNotOptimize(samples);
    }
    const double audio_seconds = static_cast<double>(samples) / model->audio().sample_rate;
    // Real-time factor: seconds of audio made per second of wall time.
    state.counters["rtf"] = benchmark::Counter(
        audio_seconds * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["audio_s"] = audio_seconds;
    state.SetLabel(model->backend().info().name);
}

// `streams` streams of one model on one device, each on its own thread
// (as the engine's producers are), each vocoding the utterance in 32-frame
// chunks at once. rtf is their total: about how many real-time streams the
// device sustains, before any scheduling margin.
void run_concurrent(benchmark::State& state, const std::string& name, const std::string& backend,
                    int streams) {
    const auto model = load_or_skip(state, name, backend);
    if (!model) return;
    const auto mel = etude::audio_io::read_npy(models_dir() + "/" + name + "_mel.npy");
    std::vector<std::unique_ptr<MelVocoderStream>> all;
    for (int i = 0; i < streams; ++i) {
        all.push_back(std::make_unique<MelVocoderStream>(model));
        all.back()->prepare();
    }
    std::vector<std::size_t> samples(static_cast<std::size_t>(streams));
    for (auto _ : state) {
        std::vector<std::thread> threads;
        for (int i = 0; i < streams; ++i)
            threads.emplace_back([&, i] { samples[i] = stream_utterance(*all[i], mel, 32); });
        for (auto& t : threads) t.join();
    }
    std::size_t total = 0;
    for (auto n : samples) total += n;
    const double audio_seconds = static_cast<double>(total) / model->audio().sample_rate;
    state.counters["rtf"] = benchmark::Counter(
        audio_seconds * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["streams"] = streams;
    state.SetLabel(model->backend().info().name);
}

// A model and its input for the streams benchmark: a full-size model with
// its mel, or a Piper voice's decoder with a random latent.
struct Input {
    std::shared_ptr<NeuralModel> model;
    std::vector<float> mel;
    int channels = 0, frames = 0;
};

Input input_or_skip(benchmark::State& state, const std::string& name, const std::string& backend) {
    Input in;
    if (name != "piper_decoder") {
        in.model = load_or_skip(state, name, backend);
        if (!in.model) return in;
        auto mel = etude::audio_io::read_npy(models_dir() + "/" + name + "_mel.npy");
        in.channels = static_cast<int>(mel.shape[0]);
        in.frames = static_cast<int>(mel.shape[1]);
        in.mel = std::move(mel.data);
        return in;
    }
    const char* voice = std::getenv("ETUDE_DECODER_VOICE");
    if (!voice) {
        state.SkipWithError("set ETUDE_DECODER_VOICE to a Piper voice's .onnx");
        return in;
    }
    try {
        const auto weights = etude::engine::read_vits_weights(voice);
        in.model = etude::engine::load_vits_decoder(weights, 22050, 0, voice,
                                                    etude::engine::open_model_backend(backend, -1));
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
        return in;
    }
    in.channels = in.model->audio().n_mels;
    in.frames = 200;  // 2.3 s at 22050 Hz
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    in.mel.resize(static_cast<std::size_t>(in.channels) * in.frames);
    for (float& v : in.mel) v = normal(rng);
    return in;
}

// `streams` streams of one model on one thread, each through the utterance
// in `chunk`-frame chunks, a chunk of each stream per step: alone, each
// stream's push in turn; together, one push_together() of all of them.
// replay: pushes may replay recordings of their chunks' device work, a
// lone stream's or a settled batch's (NetworkStream::set_replay; only where
// the backend replays natively, a batch only of streams in slots).
// join: the streams take slots as on a GPU (set_join_streams).
void run_streams(benchmark::State& state, const std::string& name, const std::string& backend,
                 int streams, int chunk, bool together, bool replay = true, bool join = false) {
    const Input in = input_or_skip(state, name, backend);
    if (!in.model) return;
    if (join) in.model->set_join_streams(true);
    std::vector<std::unique_ptr<etude::engine::NetworkStream>> all;
    for (int i = 0; i < streams; ++i) all.push_back(in.model->open_stream());
    if (!all[0]) {
        state.SkipWithError("the model does not run incrementally");
        return;
    }
    for (auto& s : all) s->set_replay(replay);
    std::vector<std::vector<float>> values(static_cast<std::size_t>(streams));
    std::vector<float> part;
    std::size_t samples = 0;
    for (auto _ : state) {
        for (auto& s : all) s->reset();
        for (auto& v : values) v.clear();
        for (int f0 = 0; f0 < in.frames; f0 += chunk) {
            const int n = std::min(chunk, in.frames - f0);
            const bool flush = f0 + n == in.frames;
            etude::engine::copy_mel_frames(in.mel, in.channels, in.frames, f0, n, part);
            std::vector<etude::engine::StreamPush> pushes;
            for (int i = 0; i < streams; ++i)
                pushes.push_back({all[i].get(), part.data(), n, flush, &values[i]});
            if (together)
                all[0]->push_together(pushes);
            else
                for (const auto& p : pushes)
                    p.stream->push(p.mel, p.frames, p.flush, *p.values,
                                   etude::engine::Batching::Alone);
        }
        samples = 0;
        for (const auto& v : values) samples += v.size();
    }
    const double audio_seconds = static_cast<double>(samples) / in.model->audio().sample_rate;
    state.counters["rtf"] = benchmark::Counter(
        audio_seconds * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["streams"] = streams;
    state.SetLabel(in.model->backend().info().name);
}

void register_streams() {
    std::vector<std::string> backends = {"cpu", "cuda"};
    if (std::getenv("ETUDE_BENCH_VULKAN")) backends.push_back("vulkan");
    for (const char* name : {"hifigan_v1", "hifigan_v3", "vocos", "piper_decoder"})
        for (const std::string& backend : backends)
            for (int chunk : {4, 32})
                for (bool together : {false, true})
                    benchmark::RegisterBenchmark(
                        ("Neural/" + std::string(name) + "/" + backend + "/streams16_chunk" +
                         std::to_string(chunk) + "/" + (together ? "together" : "alone"))
                            .c_str(),
                        [=](benchmark::State& s) {
                            run_streams(s, name, backend, 16, chunk, together);
                        })
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime()
                        ->MinTime(2.0);
}

// A Piper decoder's chunks replayed from recordings or issued op by op: one
// stream alone, and four pushed together in slots (each settled batch
// replayed from its recording). The host's time per chunk or batch is the
// CPU column (the device's work runs on the driver's threads; on lavapipe,
// the CPU's, so the real time means little).
void register_replay() {
    std::vector<std::string> backends = {"cuda"};
    if (std::getenv("ETUDE_BENCH_VULKAN")) backends.push_back("vulkan");
    for (const std::string& backend : backends)
        for (int streams : {1, 4})
            for (int chunk : {4, 32})
                for (bool replay : {false, true}) {
                    const bool together = streams > 1;
                    const std::string name =
                        "Neural/piper_decoder/" + backend + "/stream" + (together ? "s" : "") +
                        std::to_string(streams) + "_chunk" + std::to_string(chunk) + "/" +
                        (together ? "together_" : "") + (replay ? "replayed" : "op_by_op");
                    benchmark::RegisterBenchmark(name.c_str(),
                                                 [=](benchmark::State& s) {
                                                     run_streams(s, "piper_decoder", backend,
                                                                 streams, chunk, together, replay,
                                                                 together);
                                                 })
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime()
                        ->MinTime(2.0);
                }
}

void register_all() {
    for (const char* name : {"hifigan_v1", "hifigan_v3", "vocos"})
        // OpenCL and Vulkan at full size only on request (ETUDE_BENCH_OPENCL=1,
        // ETUDE_BENCH_VULKAN=1: the GPU pack sets the latter): on PoCL and
        // lavapipe, the CPU devices here, one V1 utterance takes minutes.
        for (const char* backend : {"cpu", "opencl", "vulkan", "cuda"})
            if ((std::string(backend) != "opencl" || std::getenv("ETUDE_BENCH_OPENCL")) &&
                (std::string(backend) != "vulkan" || std::getenv("ETUDE_BENCH_VULKAN")))
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

void register_concurrent() {
    struct Counts {
        const char* backend;
        std::vector<int> streams;
    };
    // On a GPU, enough streams to fill it (skipped without CUDA; Vulkan on
    // request, as above).
    std::vector<Counts> counts = {{"cpu", {1, 2, 4}}, {"cuda", {1, 16, 64, 256}}};
    if (std::getenv("ETUDE_BENCH_VULKAN")) counts.push_back({"vulkan", {1, 16, 64, 256}});
    for (const char* name : {"hifigan_v1", "hifigan_v3", "vocos"})
        for (const Counts& c : counts)
            for (int n : c.streams) {
                const char* backend = c.backend;
                benchmark::RegisterBenchmark(
                    ("Neural/" + std::string(name) + "/" + backend + "/concurrent/" +
                     std::to_string(n))
                        .c_str(),
                    [=](benchmark::State& s) { run_concurrent(s, name, backend, n); })
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime()
                    ->MinTime(2.0);
            }
}

const bool registered =
    (register_all(), register_concurrent(), register_streams(), register_replay(), true);

}  // namespace
