// The CPU backend's convolutions at the shapes of the neural vocoders
// (HiFi-GAN V1: upsample rates 8, 8, 2, 2 with kernels 16, 16, 4, 4, channels
// 512 -> 256 -> 128 -> 64 -> 32, residual kernels 3, 7, 11 with dilations 1,
// 3, 5; Vocos: depthwise kernel-7 convolutions over 512 channels of frames).
// main() comes from bench/main.cpp.
//
// FLOP/s counts 2 flops per multiply-add of the convolution itself
// (2 * out_channels * in_channels/groups * kernel * out_length per batch item
// for conv1d, 2 * in_channels * out_channels/groups * kernel * in_length for
// the transposed one), so it compares directly with SGEMM's rate. Real time
// is reported: OpenBLAS runs the GEMMs on its own threads, so the calling
// thread's CPU time would undercount.
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/random_buffer.h"
#include "gpu/cpu/cpu_backend.h"

namespace {

using namespace etude::gpu;

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

using etude::bench::random_buffer;

Conv1dShape shape(int in_ch, int out_ch, int len, int kernel, int stride, int dilation, int padding,
                  int groups) {
    Conv1dShape s;
    s.in_channels = in_ch;
    s.out_channels = out_ch;
    s.in_length = len;
    s.kernel = kernel;
    s.stride = stride;
    s.dilation = dilation;
    s.padding = padding;
    s.groups = groups;
    return s;
}

void BM_CpuConv1d(benchmark::State& state, Conv1dShape s) {
    Backend& b = cpu();
    auto q = b.create_queue();
    const int out_len = s.conv_out_length();
    auto x = random_buffer(b, *q, std::size_t(s.batch) * s.in_channels * s.in_length, 1);
    auto w = random_buffer(b, *q,
                           std::size_t(s.out_channels) * (s.in_channels / s.groups) * s.kernel, 2);
    auto bias = random_buffer(b, *q, s.out_channels, 3);
    auto y = b.allocate(std::size_t(s.batch) * s.out_channels * out_len, "bench");
    b.conv1d(*q, s, x, w, bias, y);  // warm-up, untimed: scratch, OpenBLAS threads
    for (auto _ : state) {
        b.conv1d(*q, s, x, w, bias, y);
        b.synchronize(*q);
    }
    state.counters["FLOP/s"] = benchmark::Counter(
        2.0 * s.batch * s.out_channels * (s.in_channels / s.groups) * s.kernel * out_len,
        benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CpuConvTranspose1d(benchmark::State& state, Conv1dShape s) {
    Backend& b = cpu();
    auto q = b.create_queue();
    const int out_len = s.transpose_out_length();
    auto x = random_buffer(b, *q, std::size_t(s.batch) * s.in_channels * s.in_length, 4);
    auto w = random_buffer(b, *q,
                           std::size_t(s.in_channels) * (s.out_channels / s.groups) * s.kernel, 5);
    auto bias = random_buffer(b, *q, s.out_channels, 6);
    auto y = b.allocate(std::size_t(s.batch) * s.out_channels * out_len, "bench");
    b.conv_transpose1d(*q, s, x, w, bias, y);  // warm-up, untimed
    for (auto _ : state) {
        b.conv_transpose1d(*q, s, x, w, bias, y);
        b.synchronize(*q);
    }
    state.counters["FLOP/s"] = benchmark::Counter(
        2.0 * s.batch * s.in_channels * (s.out_channels / s.groups) * s.kernel * s.in_length,
        benchmark::Counter::kIsIterationInvariantRate);
}

// HiFi-GAN V1 for 64 mel frames (0.74 s at 22.05 kHz, hop 256).
// conv_pre: 80 mel bins -> 512 channels, kernel 7.
BENCHMARK_CAPTURE(BM_CpuConv1d, hifigan_pre_80to512_k7_len64, shape(80, 512, 64, 7, 1, 1, 3, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// First residual stage (256 channels after the x8 upsampler), kernel 3.
BENCHMARK_CAPTURE(BM_CpuConv1d, hifigan_res_256ch_k3_d3_len512, shape(256, 256, 512, 3, 1, 3, 3, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// Second stage (128 channels; 8192 samples is 128 frames), the widest residual kernel.
BENCHMARK_CAPTURE(BM_CpuConv1d, hifigan_res_128ch_k11_d5_len8192,
                  shape(128, 128, 8192, 11, 1, 5, 25, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// Last stage: 32 channels at the full sample rate (16384 samples for 64 frames).
BENCHMARK_CAPTURE(BM_CpuConv1d, hifigan_res_32ch_k7_d3_len16384,
                  shape(32, 32, 16384, 7, 1, 3, 9, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// conv_post: 32 channels -> 1 (the waveform), kernel 7.
BENCHMARK_CAPTURE(BM_CpuConv1d, hifigan_post_32to1_k7_len16384, shape(32, 1, 16384, 7, 1, 1, 3, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// The VITS flow (Piper medium): a WaveNet layer's dilated conv, 192 -> 384
// channels, kernel 5, over one push of frames (32-47) and over a sentence.
BENCHMARK_CAPTURE(BM_CpuConv1d, vits_flow_192to384_k5_len40, shape(192, 384, 40, 5, 1, 1, 2, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CpuConv1d, vits_flow_192to384_k5_len400, shape(192, 384, 400, 5, 1, 1, 2, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// The VITS flow's 1x1 layers (a WaveNet layer's residual and skip outputs,
// 192 -> 192 channels) over one push of frames and over a sentence.
BENCHMARK_CAPTURE(BM_CpuConv1d, vits_flow_192to192_k1_len40, shape(192, 192, 40, 1, 1, 1, 0, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CpuConv1d, vits_flow_192to192_k1_len400, shape(192, 192, 400, 1, 1, 1, 0, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
// Vocos ConvNeXt block: depthwise, 512 channels, kernel 7, over frames.
BENCHMARK_CAPTURE(BM_CpuConv1d, vocos_depthwise_512ch_k7_len1024,
                  shape(512, 512, 1024, 7, 1, 1, 3, 512))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Upsamplers: 512 -> 256 (x8), 256 -> 128 (x8), 64 -> 32 (x2).
BENCHMARK_CAPTURE(BM_CpuConvTranspose1d, hifigan_up_512to256_k16_s8_len64,
                  shape(512, 256, 64, 16, 8, 1, 4, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CpuConvTranspose1d, hifigan_up_256to128_k16_s8_len512,
                  shape(256, 128, 512, 16, 8, 1, 4, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CpuConvTranspose1d, hifigan_up_64to32_k4_s2_len8192,
                  shape(64, 32, 8192, 4, 2, 1, 1, 1))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
