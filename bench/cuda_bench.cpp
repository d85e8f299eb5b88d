// Benchmarks for the CUDA backend. main() comes from bench/main.cpp.
//
// The backend is loaded at run time from libetude_cuda.so, as the registry
// does: $ETUDE_CUDA_MODULE, or else the build tree next to this program
// (<build>/bench/etude_bench -> <build>/gpu/cuda/libetude_cuda.so). Without
// the module, a driver or a GPU, every benchmark here reports "no CUDA
// device: <why>" and is skipped.
//
// Timing: each iteration issues the work and synchronizes the queue, and the
// wall time of both is the iteration time (manual time), so the numbers
// include launch overhead and the wait — what a caller blocking on a result
// sees. Each benchmark runs its work once before timing, so that cuFFT plans
// and the cuBLAS handle are created outside the measurement.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/random_buffer.h"
#include "gpu/backend.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/registry.h"

namespace {

using namespace etude::gpu;

struct CudaDevice {
    std::shared_ptr<Backend> backend;
    std::unique_ptr<Queue> queue;
    std::string unusable;  // "no CUDA device: <why>" when backend is null
};

// Opened through the device registry, as the engine does.
CudaDevice open_device() {
    CudaDevice d;
    try {
        d.backend = DeviceRegistry::instance().open({"cuda", 0});
        d.queue = d.backend->create_queue();
    } catch (const std::exception& e) {
        d.unusable = std::string("no CUDA device: ") + e.what();
    }
    return d;
}

// Opened once; deliberately leaked so that nothing CUDA runs during static
// destruction, after the runtime's own exit handlers.
CudaDevice& device() {
    static CudaDevice* d = new CudaDevice(open_device());
    return *d;
}

// Skips the benchmark (returning null) when there is no device.
Backend* backend_or_skip(benchmark::State& state) {
    CudaDevice& d = device();
    if (!d.backend) state.SkipWithError(d.unusable.c_str());
    return d.backend.get();
}

DeviceBuffer upload_noise(Backend& b, Queue& q, std::size_t n) {
    return etude::bench::random_buffer(b, q, n, 42);
}

// Runs `work` once untimed, then times work + synchronize per iteration.
template <typename Work>
void time_synchronized(benchmark::State& state, Backend& b, Queue& q, Work&& work) {
    work();
    b.synchronize(q);
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        work();
        b.synchronize(q);
        state.SetIterationTime(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
}

void BM_CudaGemm(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const int n = static_cast<int>(state.range(0));
    const std::size_t size = static_cast<std::size_t>(n) * n;
    auto a = upload_noise(*b, q, size), m = upload_noise(*b, q, size);
    auto c = b->allocate(size, "bench");
    time_synchronized(state, *b, q,
                      [&] { b->gemm(q, false, false, n, n, n, 1.0f, a, n, m, n, 0.0f, c, n); });
    state.counters["flop_per_iter"] = 2.0 * n * n * n;
}
BENCHMARK(BM_CudaGemm)->Arg(64)->Arg(256)->Arg(512)->Arg(1024)->UseManualTime();

void BM_CudaConv1d(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const Conv1dShape s{.batch = 1,
                        .in_channels = 256,
                        .out_channels = 256,
                        .in_length = 1024,
                        .kernel = 7,
                        .padding = 3};
    auto x = upload_noise(*b, q, static_cast<std::size_t>(s.in_channels) * s.in_length);
    auto w = upload_noise(*b, q, static_cast<std::size_t>(s.out_channels) * s.in_channels * 7);
    auto bias = upload_noise(*b, q, s.out_channels);
    auto y = b->allocate(static_cast<std::size_t>(s.out_channels) * s.conv_out_length(), "bench");
    time_synchronized(state, *b, q, [&] { b->conv1d(q, s, x, w, bias, y); });
}
BENCHMARK(BM_CudaConv1d)->UseManualTime();

// A batch of streams' windows through one layer, as a device batch of
// 32-frame decoder chunks runs it (gpu/conv_as_gemm.h: one cuBLAS GEMM for
// the batch; ETUDE_CUDA_CONV=direct in the environment measures the direct
// kernel instead). Piper medium's second-stage resblock: 128 channels,
// kernel 7, dilation 3, 32 frames x 64 samples plus the window's context.
void BM_CudaConv1dBatch(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const Conv1dShape s{.batch = static_cast<int>(state.range(0)),
                        .in_channels = 128,
                        .out_channels = 128,
                        .in_length = 2048 + 18,
                        .kernel = 7,
                        .dilation = 3,
                        .padding = 0};
    const std::size_t items = static_cast<std::size_t>(s.batch);
    auto x = upload_noise(*b, q, items * s.in_channels * s.in_length);
    auto w = upload_noise(*b, q, static_cast<std::size_t>(s.out_channels) * s.in_channels * 7);
    auto bias = upload_noise(*b, q, s.out_channels);
    auto y = b->allocate(items * s.out_channels * s.conv_out_length(), "bench");
    time_synchronized(state, *b, q, [&] { b->conv1d(q, s, x, w, bias, y); });
    state.counters["flop_per_iter"] =
        2.0 * double(items) * s.out_channels * s.in_channels * 7 * s.conv_out_length();
}
BENCHMARK(BM_CudaConv1dBatch)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseManualTime();

// The same for the first upsampler (512 to 256 channels, kernel 16, stride
// 8) over 32 frames and its window's tail.
void BM_CudaConvTranspose1dBatch(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const Conv1dShape s{.batch = static_cast<int>(state.range(0)),
                        .in_channels = 512,
                        .out_channels = 256,
                        .in_length = 33,
                        .kernel = 16,
                        .stride = 8,
                        .padding = 4};
    const std::size_t items = static_cast<std::size_t>(s.batch);
    auto x = upload_noise(*b, q, items * s.in_channels * s.in_length);
    auto w = upload_noise(*b, q, static_cast<std::size_t>(s.in_channels) * s.out_channels * 16);
    auto bias = upload_noise(*b, q, s.out_channels);
    auto y = b->allocate(items * s.out_channels * s.transpose_out_length(), "bench");
    time_synchronized(state, *b, q, [&] { b->conv_transpose1d(q, s, x, w, bias, y); });
    state.counters["flop_per_iter"] =
        2.0 * double(items) * s.in_channels * s.out_channels * 16 * s.in_length;
}
BENCHMARK(BM_CudaConvTranspose1dBatch)->Arg(1)->Arg(16)->Arg(64)->Arg(256)->UseManualTime();

void BM_CudaRfft(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const int n = static_cast<int>(state.range(0)), batch = static_cast<int>(state.range(1));
    auto in = upload_noise(*b, q, static_cast<std::size_t>(n) * batch);
    auto out = b->allocate(static_cast<std::size_t>(n / 2 + 1) * 2 * batch, "bench");
    time_synchronized(state, *b, q, [&] { b->rfft(q, n, batch, in, out); });
}
BENCHMARK(BM_CudaRfft)
    ->Args({512, 64})
    ->Args({1024, 64})
    ->Args({512, 1024})
    ->Args({1024, 1024})
    ->UseManualTime();

void BM_CudaGelu(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const std::size_t n = static_cast<std::size_t>(state.range(0));
    auto x = upload_noise(*b, q, n);
    auto y = b->allocate(n, "bench");
    time_synchronized(state, *b, q, [&] { b->activation(q, Activation::Gelu, x, y, n); });
}
BENCHMARK(BM_CudaGelu)->Arg(1 << 20)->UseManualTime();

// A batch's gather of its streams' held frames (Backend::copy_rows, strided):
// range(0) streams of 192 channel rows, 16 frames of each row's 64 into a
// batch buffer of 16 a row; the shape the fourth H200 run found taking a
// third of the device's time (docs/benchmarks.md).
void BM_CudaCopyRowsStrided(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const int rows = static_cast<int>(state.range(0)) * 192, cols = 16;
    const std::size_t src_stride = 64, rows_n = static_cast<std::size_t>(rows);
    auto x = upload_noise(*b, q, rows_n * src_stride);
    auto y = b->allocate(rows_n * cols, "bench");
    time_synchronized(state, *b, q,
                      [&] { b->copy_rows(q, rows, cols, x, 0, src_stride, y, 0, cols); });
    state.counters["bytes_per_iter"] = 2.0 * rows * cols * sizeof(float);
}
BENCHMARK(BM_CudaCopyRowsStrided)->Arg(1)->Arg(64)->Arg(256)->UseManualTime();

// Host <-> device copies from and to pinned memory; range(0) is bytes.
void BM_CudaCopyToDevice(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const std::size_t floats = static_cast<std::size_t>(state.range(0)) / sizeof(float);
    PinnedBuffer host(b, b->allocate_pinned(floats), floats);
    auto dev = b->allocate(floats, "bench");
    time_synchronized(state, *b, q, [&] { b->copy_to_device(q, dev, 0, host.data(), floats); });
    state.counters["bytes_per_iter"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_CudaCopyToDevice)->Arg(4 << 10)->Arg(64 << 10)->Arg(4 << 20)->UseManualTime();

void BM_CudaCopyToHost(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    const std::size_t floats = static_cast<std::size_t>(state.range(0)) / sizeof(float);
    PinnedBuffer host(b, b->allocate_pinned(floats), floats);
    auto dev = upload_noise(*b, q, floats);
    time_synchronized(state, *b, q, [&] { b->copy_to_host(q, host.data(), dev, 0, floats); });
    state.counters["bytes_per_iter"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_CudaCopyToHost)->Arg(4 << 10)->Arg(64 << 10)->Arg(4 << 20)->UseManualTime();

// Launch overhead: ten small ops (a block's worth of work each), issued one
// by one, and the same ten recorded once as a CUDA graph and replayed
// (gpu::Backend::record, docs/backends.md "Recordings").
constexpr std::size_t kSmall = 1024;

void ten_small_ops(Backend& b, Queue& q, DeviceBuffer& x, DeviceBuffer& y) {
    for (int i = 0; i < 5; ++i) {
        b.activation(q, Activation::Tanh, x, y, kSmall);
        b.activation(q, Activation::LeakyRelu, y, x, kSmall, 0.1f);
    }
}

void BM_CudaTenSmallOps(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    auto x = upload_noise(*b, q, kSmall);
    auto y = b->allocate(kSmall, "bench");
    time_synchronized(state, *b, q, [&] { ten_small_ops(*b, q, x, y); });
}
BENCHMARK(BM_CudaTenSmallOps)->UseManualTime();

void BM_CudaTenSmallOpsReplayed(benchmark::State& state) {
    Backend* b = backend_or_skip(state);
    if (!b) return;
    Queue& q = *device().queue;
    auto x = upload_noise(*b, q, kSmall);
    auto y = b->allocate(kSmall, "bench");
    const Recording step = b->record(q, [&](Queue& rq) { ten_small_ops(*b, rq, x, y); });
    time_synchronized(state, *b, q, [&] { b->replay(q, step); });
}
BENCHMARK(BM_CudaTenSmallOpsReplayed)->UseManualTime();

}  // namespace
