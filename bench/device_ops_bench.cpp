// The CPU reference backend against OpenCL device 0 and Vulkan device 0 on
// the vocoder's heavy ops, plus the cost of moving data to and from the
// device. Here those are PoCL and lavapipe, both on the CPU, so the numbers
// compare the two stacks' overheads, not GPUs; on a GPU machine the same
// benchmarks run on its OpenCL and Vulkan drivers (the GPU pack runs the
// Vulkan ones). main() comes from bench/main.cpp.
//
// Each benchmark makes one untimed call first (plans, pipelines, caches:
// clFFT bakes a plan on its first call, seconds on PoCL). Every iteration
// ends with synchronize(), so the numbers are complete round trips (enqueue
// + device work + wait), and real time is reported: the calling thread
// mostly waits while the device (or PoCL's and lavapipe's worker threads)
// computes, so its CPU time would say nothing.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/random_buffer.h"
#include "gpu/cpu/cpu_backend.h"
#include "gpu/registry.h"

namespace {

using namespace etude::gpu;

enum class Which { Cpu, OpenCl, Vulkan };

struct Opened {
    std::shared_ptr<Backend> backend;
    std::string why;  // when there is none
};

// Device 0 of a kind through the registry (which keeps it open for the run:
// opening a device compiles its kernels or pipelines).
Opened open(const char* kind) {
    try {
        return {DeviceRegistry::instance().open({kind, 0}), ""};
    } catch (const std::exception& e) {
        return {nullptr, std::string("no ") + kind + " device: " + e.what()};
    }
}

// Returns the backend, or null after marking the benchmark skipped.
Backend* backend_or_skip(benchmark::State& state, Which which) {
    static CpuBackend cpu;
    static const Opened opencl = open("opencl"), vulkan = open("vulkan");
    if (which == Which::Cpu) return &cpu;
    const Opened& o = which == Which::OpenCl ? opencl : vulkan;
    if (!o.backend) state.SkipWithError(o.why.c_str());
    return o.backend.get();
}

using etude::bench::random_buffer;

void BM_Gemm(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    const int n = static_cast<int>(state.range(0));
    auto q = b->create_queue();
    const std::size_t elems = static_cast<std::size_t>(n) * n;
    auto a = random_buffer(*b, *q, elems, 1);
    auto bb = random_buffer(*b, *q, elems, 2);
    auto c = b->allocate(elems, "bench");
    b->gemm(*q, false, false, n, n, n, 1.0f, a, n, bb, n, 0.0f, c, n);  // warm-up, untimed
    b->synchronize(*q);
    for (auto _ : state) {
        b->gemm(*q, false, false, n, n, n, 1.0f, a, n, bb, n, 0.0f, c, n);
        b->synchronize(*q);
    }
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_Gemm, cpu, Which::Cpu)->Arg(64)->Arg(256)->Arg(512)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, opencl, Which::OpenCl)->Arg(64)->Arg(256)->Arg(512)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, vulkan, Which::Vulkan)->Arg(64)->Arg(256)->Arg(512)->UseRealTime();

// A vocoder-sized layer: 256 -> 256 channels, kernel 7, 1024 samples.
void BM_Conv1d(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    Conv1dShape s;
    s.batch = 1;
    s.in_channels = s.out_channels = 256;
    s.in_length = 1024;
    s.kernel = 7;
    s.padding = 3;
    auto q = b->create_queue();
    auto x = random_buffer(*b, *q, std::size_t(s.in_channels) * s.in_length, 3);
    auto w = random_buffer(*b, *q, std::size_t(s.out_channels) * s.in_channels * s.kernel, 4);
    auto bias = random_buffer(*b, *q, s.out_channels, 5);
    auto y = b->allocate(std::size_t(s.out_channels) * s.conv_out_length(), "bench");
    b->conv1d(*q, s, x, w, bias, y);  // warm-up, untimed
    b->synchronize(*q);
    for (auto _ : state) {
        b->conv1d(*q, s, x, w, bias, y);
        b->synchronize(*q);
    }
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * s.out_channels * s.in_channels * s.kernel * s.conv_out_length(),
                           benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_Conv1d, cpu, Which::Cpu)->UseRealTime();
BENCHMARK_CAPTURE(BM_Conv1d, opencl, Which::OpenCl)->UseRealTime();
BENCHMARK_CAPTURE(BM_Conv1d, vulkan, Which::Vulkan)->UseRealTime();

// A vocoder upsampler: 256 -> 128 channels, kernel 16, stride 8, 128 frames in.
void BM_ConvTranspose1d(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    Conv1dShape s;
    s.batch = 1;
    s.in_channels = 256;
    s.out_channels = 128;
    s.in_length = 128;
    s.kernel = 16;
    s.stride = 8;
    s.padding = 4;
    auto q = b->create_queue();
    auto x = random_buffer(*b, *q, std::size_t(s.in_channels) * s.in_length, 6);
    auto w = random_buffer(*b, *q, std::size_t(s.in_channels) * s.out_channels * s.kernel, 7);
    auto bias = random_buffer(*b, *q, s.out_channels, 8);
    auto y = b->allocate(std::size_t(s.out_channels) * s.transpose_out_length(), "bench");
    b->conv_transpose1d(*q, s, x, w, bias, y);  // warm-up, untimed
    b->synchronize(*q);
    for (auto _ : state) {
        b->conv_transpose1d(*q, s, x, w, bias, y);
        b->synchronize(*q);
    }
    state.counters["FLOP/s"] =
        benchmark::Counter(2.0 * s.in_channels * s.out_channels * s.kernel * s.in_length,
                           benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_ConvTranspose1d, cpu, Which::Cpu)->UseRealTime();
BENCHMARK_CAPTURE(BM_ConvTranspose1d, opencl, Which::OpenCl)->UseRealTime();
BENCHMARK_CAPTURE(BM_ConvTranspose1d, vulkan, Which::Vulkan)->UseRealTime();

// 64 frames of length n per call, as one STFT block.
void BM_RfftBatch64(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    const int n = static_cast<int>(state.range(0));
    constexpr int kBatch = 64;
    auto q = b->create_queue();
    auto in = random_buffer(*b, *q, std::size_t(n) * kBatch, 6);
    auto out = b->allocate(std::size_t(n / 2 + 1) * 2 * kBatch, "bench");
    b->rfft(*q, n, kBatch, in, out);  // first call makes the plan (FFTW, clFFT) or twiddles
    b->synchronize(*q);
    for (auto _ : state) {
        b->rfft(*q, n, kBatch, in, out);
        b->synchronize(*q);
    }
    state.SetItemsProcessed(state.iterations() * kBatch);  // transforms
}
BENCHMARK_CAPTURE(BM_RfftBatch64, cpu, Which::Cpu)->Arg(512)->Arg(1024)->UseRealTime();
BENCHMARK_CAPTURE(BM_RfftBatch64, opencl, Which::OpenCl)->Arg(512)->Arg(1024)->UseRealTime();
BENCHMARK_CAPTURE(BM_RfftBatch64, vulkan, Which::Vulkan)->Arg(512)->Arg(1024)->UseRealTime();

void BM_Gelu1M(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    constexpr std::size_t kN = 1 << 20;
    auto q = b->create_queue();
    auto x = random_buffer(*b, *q, kN, 7);
    auto y = b->allocate(kN, "bench");
    b->activation(*q, Activation::Gelu, x, y, kN, 0.0f);  // warm-up, untimed
    b->synchronize(*q);
    for (auto _ : state) {
        b->activation(*q, Activation::Gelu, x, y, kN, 0.0f);
        b->synchronize(*q);
    }
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kN));
}
BENCHMARK_CAPTURE(BM_Gelu1M, cpu, Which::Cpu)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gelu1M, opencl, Which::OpenCl)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gelu1M, vulkan, Which::Vulkan)->UseRealTime();

// Host -> device then device -> host of the same block: the fixed cost a
// device op pays on top of its kernel. Pinned host memory, as the engine uses.
void BM_CopyRoundTrip(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    const std::size_t bytes = static_cast<std::size_t>(state.range(0));
    const std::size_t floats = bytes / sizeof(float);
    auto q = b->create_queue();
    PinnedBuffer host(b, b->allocate_pinned(floats), floats);
    for (std::size_t i = 0; i < floats; ++i) host.data()[i] = static_cast<float>(i);
    auto dev = b->allocate(floats, "bench");
    b->copy_to_device(*q, dev, 0, host.data(), floats);  // warm-up, untimed
    b->synchronize(*q);
    for (auto _ : state) {
        b->copy_to_device(*q, dev, 0, host.data(), floats);
        b->copy_to_host(*q, host.data(), dev, 0, floats);
        b->synchronize(*q);
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * bytes));
}
BENCHMARK_CAPTURE(BM_CopyRoundTrip, cpu, Which::Cpu)
    ->Arg(4 << 10)
    ->Arg(64 << 10)
    ->Arg(4 << 20)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CopyRoundTrip, opencl, Which::OpenCl)
    ->Arg(4 << 10)
    ->Arg(64 << 10)
    ->Arg(4 << 20)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CopyRoundTrip, vulkan, Which::Vulkan)
    ->Arg(4 << 10)
    ->Arg(64 << 10)
    ->Arg(4 << 20)
    ->UseRealTime();

// A batch's gather of its streams' held frames (Backend::copy_rows, strided):
// range(0) streams of 192 channel rows, 16 frames of each row's 64 into a
// batch buffer of 16 a row: one launch of the shared body on Vulkan
// (gpu/kernels/kernel_bodies.h's copy_rows_at), a rectangle copy on OpenCL.
void BM_CopyRowsStrided(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    const int rows = static_cast<int>(state.range(0)) * 192, cols = 16;
    const std::size_t src_stride = 64, rows_n = static_cast<std::size_t>(rows);
    auto q = b->create_queue();
    auto x = random_buffer(*b, *q, rows_n * src_stride, 3);
    auto y = b->allocate(rows_n * cols, "bench");
    const auto run = [&] {
        b->copy_rows(*q, rows, cols, x, 0, src_stride, y, 0, cols);
        b->synchronize(*q);
    };
    run();  // warm-up, untimed
    for (auto _ : state) run();
    state.SetBytesProcessed(state.iterations() * 2 * static_cast<std::int64_t>(rows) * cols *
                            static_cast<std::int64_t>(sizeof(float)));
}
BENCHMARK_CAPTURE(BM_CopyRowsStrided, cpu, Which::Cpu)->Arg(1)->Arg(64)->UseRealTime();
BENCHMARK_CAPTURE(BM_CopyRowsStrided, opencl, Which::OpenCl)->Arg(1)->Arg(64)->UseRealTime();
BENCHMARK_CAPTURE(BM_CopyRowsStrided, vulkan, Which::Vulkan)->Arg(1)->Arg(64)->UseRealTime();

// A step of many small ops (64 element-wise ops on 256 floats, each reading
// the one before), issued one by one against the same step recorded once and
// replayed (gpu::Backend::record): what a replay saves the host per step
// (argument checks, recording each command, the barrier plan), plus the
// device work. On the CPU and OpenCL the replay is the fallback, which calls
// the ops one by one again.
constexpr std::size_t kStepFloats = 256;
constexpr int kStepOps = 64;

void small_ops_step(Backend& b, Queue& q, DeviceBuffer& x, DeviceBuffer& y) {
    for (int i = 0; i < kStepOps / 2; ++i) {
        b.activation(q, Activation::Tanh, x, y, kStepFloats);
        b.activation(q, Activation::LeakyRelu, y, x, kStepFloats, 0.1f);
    }
}

void BM_SmallOpsStep(benchmark::State& state, Which which) {
    Backend* b = backend_or_skip(state, which);
    if (!b) return;
    const bool replayed = state.range(0) != 0;
    auto q = b->create_queue();
    auto x = random_buffer(*b, *q, kStepFloats, 1);
    auto y = b->allocate(kStepFloats, "bench");
    Recording step;
    if (replayed) step = b->record(*q, [&](Queue& rq) { small_ops_step(*b, rq, x, y); });
    const auto run = [&] {
        if (replayed)
            b->replay(*q, step);
        else
            small_ops_step(*b, *q, x, y);
        b->synchronize(*q);
    };
    run();  // warm-up, untimed
    for (auto _ : state) run();
    state.SetLabel(replayed ? (step.replays_natively() ? "replayed" : "replayed (fallback)")
                            : "one by one");
}
BENCHMARK_CAPTURE(BM_SmallOpsStep, cpu, Which::Cpu)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK_CAPTURE(BM_SmallOpsStep, opencl, Which::OpenCl)->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK_CAPTURE(BM_SmallOpsStep, vulkan, Which::Vulkan)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
