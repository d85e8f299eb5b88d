// The parity suite's second half, on every device the registry opens (the
// fixture and tolerances: backend_parity.h): arguments a backend must
// refuse before anything runs, a buffer freed while its last operation is
// still queued, the per-op timings, and injected device faults (a failed
// kernel, out of memory, lateness) and a real out-of-memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/backend_parity.h"

namespace etude::gpu {
namespace {

// Its own suite name: the fixture is the same, defined once per test file.
class BackendFaults : public BackendParity {};

TEST_P(BackendFaults, bad_arguments_are_rejected_before_anything_runs) {
    auto x = upload(random_vector(12, 1650));
    auto y = output(10);
    EXPECT_THROW(dev_->transpose(*dq_, 3, 4, x.dev, x.dev), std::invalid_argument);
    EXPECT_THROW(dev_->polar_spectrum(*dq_, 1, 3, 100.0f, x.dev, x.dev), std::invalid_argument);
    EXPECT_THROW(dev_->copy_rows(*dq_, 2, 6, x.dev, 0, 6, y.dev, 0, 6), std::invalid_argument);
    EXPECT_THROW(dev_->copy_rows(*dq_, 1, 2, y.dev, 0, 2, y.dev, 4, 2), std::invalid_argument);
    EXPECT_THROW(dev_->copy_rows(*dq_, 2, 4, x.dev, 0, 4, y.dev, 0, 2), std::invalid_argument);
    EXPECT_THROW(dev_->activation(*dq_, Activation::Tanh, x.dev, y.dev, 11), std::invalid_argument);
    EXPECT_THROW(dev_->axpby(*dq_, 13, 1.0f, x.dev, 0.0f, x.dev), std::invalid_argument);
    EXPECT_THROW(dev_->gated_tanh(*dq_, 2, 3, x.dev, x.dev), std::invalid_argument);
    EXPECT_THROW(dev_->gated_tanh(*dq_, 2, 4, x.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(dev_->gated_tanh(*dq_, 3, 1, 3, x.dev, y.dev), std::invalid_argument);  // x: 18
    EXPECT_THROW(dev_->gated_tanh(*dq_, 3, 1, 2, x.dev, x.dev), std::invalid_argument);
    EXPECT_THROW(dev_->complex_multiply(*dq_, x.dev, x.dev, y.dev, 6), std::invalid_argument);
    EXPECT_THROW(dev_->gemm(*dq_, false, false, 3, 4, 3, 1.0f, x.dev, 2, x.dev, 4, 0.0f, x.dev, 4),
                 std::invalid_argument);  // lda below the row length
    EXPECT_THROW(dev_->frame_signal(*dq_, x.dev, 4, -1, 2, x.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(dev_->overlap_add(*dq_, x.dev, 4, 0, 2, x.dev, y.dev), std::invalid_argument);
    EXPECT_THROW(dev_->rfft(*dq_, 10, 1, x.dev, y.dev), std::invalid_argument);  // y needs 12
    const Conv1dShape bad[] = {shape(1, 3, 4, 2, 1, 1, 1, 0, 2),   // groups do not divide
                               shape(1, 2, 2, 4, 1, 0, 1, 0, 1),   // stride 0
                               shape(1, 2, 2, 4, 2, 1, 0, 0, 1),   // dilation 0
                               shape(1, 2, 2, 4, 2, 1, 1, -1, 1),  // negative padding
                               shape(1, 2, 2, 8, 1, 1, 1, 0, 1)};  // x too small
    for (const auto& s : bad) {
        EXPECT_THROW(dev_->conv1d(*dq_, s, x.dev, x.dev, DeviceBuffer{}, y.dev),
                     std::invalid_argument)
            << describe("conv1d", s, false);
        EXPECT_THROW(dev_->conv_transpose1d(*dq_, s, x.dev, x.dev, DeviceBuffer{}, y.dev),
                     std::invalid_argument)
            << describe("conv_transpose1d", s, false);
    }
    // Nothing ran: y still holds its sentinel, and the device is healthy.
    expect_equal_to("y after rejected calls", y, std::vector<float>(10, 12345.0f), 0.0);
    EXPECT_EQ(dev_->health(), Health::Ok);
}

// gpu::Backend lets a buffer go as soon as its last operation is queued
// (OpenCL and CUDA keep the memory until then). On Vulkan, where a queue runs
// only when it synchronises, freeing it there and then would let the device
// read freed memory.

TEST_P(BackendFaults, a_buffer_freed_after_its_last_op_is_queued_still_feeds_that_op) {
    const auto values = random_vector(4096, 1050);
    auto y = output(values.size());
    {
        DeviceBuffer x = dev_->allocate(values.size(), "freed early");
        dev_->copy_to_device(*dq_, x, 0, values.data(), values.size());
        dev_->activation(*dq_, Activation::Tanh, x, y.dev, values.size(), 0.0f);
    }  // x is freed here, before the queue synchronises
    // New memory of the same size, written by another queue that finishes
    // first, may reuse x's: had x been freed at once, the tanh would read -7.
    DeviceBuffer other = dev_->allocate(values.size(), "reuse");
    auto other_queue = dev_->create_queue();
    dev_->fill(*other_queue, other, -7.0f, values.size());
    dev_->synchronize(*other_queue);
    const auto x = upload(values);
    ref_.activation(*rq_, Activation::Tanh, x.ref, y.ref, values.size(), 0.0f);
    expect_close("tanh of a buffer freed before synchronize()", y, tol_.elementwise);
}

TEST_P(BackendFaults, kernel_timings_are_recorded_per_op_under_the_cpu_names) {
    dev_->reset_timings();
    dev_->set_profiling(true);
    const auto a = upload(random_vector(64 * 64, 1100));
    auto c = output(64 * 64);
    auto spec = output(2 * 129);
    dev_->gemm(*dq_, false, false, 64, 64, 64, 1.0f, a.dev, 64, a.dev, 64, 0.0f, c.dev, 64);
    dev_->activation(*dq_, Activation::Gelu, c.dev, c.dev, 64 * 64, 0.0f);
    // A size the FFT test bakes already (clFFT plans take seconds on PoCL).
    dev_->rfft(*dq_, 256, 1, c.dev, spec.dev);
    (void)dev_data(c);  // a d2h, and synchronize() collects the timings
    const auto timings = dev_->kernel_timings();
    for (const char* name : {"gemm", "gelu", "rfft", "h2d", "d2h"}) {
        const auto it = std::find_if(timings.begin(), timings.end(),
                                     [&](const KernelTiming& t) { return t.name == name; });
        ASSERT_NE(it, timings.end()) << name;
        EXPECT_GE(it->calls, 1u) << name;
        EXPECT_GE(it->total_ms, 0.0) << name;
        EXPECT_GE(it->total_ms, it->max_ms) << name;
    }
    // A device that times its commands gives a 64^3 GEMM a time.
    const auto& caps = dev_->info().capabilities;
    if (std::find(caps.begin(), caps.end(), "profiling") != caps.end()) {
        const auto gemm = std::find_if(timings.begin(), timings.end(),
                                       [](const KernelTiming& t) { return t.name == "gemm"; });
        EXPECT_GT(gemm->total_ms, 0.0);
    }
    dev_->reset_timings();
    EXPECT_TRUE(dev_->kernel_timings().empty());
    dev_->set_profiling(false);
}

TEST_P(BackendFaults, nothing_is_timed_unless_profiling) {
    dev_->set_profiling(false);
    dev_->reset_timings();
    const auto a = upload(random_vector(64 * 64, 1101));
    auto c = output(64 * 64);
    dev_->gemm(*dq_, false, false, 64, 64, 64, 1.0f, a.dev, 64, a.dev, 64, 0.0f, c.dev, 64);
    (void)dev_data(c);
    EXPECT_TRUE(dev_->kernel_timings().empty());
    // The result is the same either way (checked against the reference
    // elsewhere); here, that the switch takes effect at the next operation.
    dev_->set_profiling(true);
    dev_->gemm(*dq_, false, false, 64, 64, 64, 1.0f, a.dev, 64, a.dev, 64, 0.0f, c.dev, 64);
    (void)dev_data(c);
    dev_->set_profiling(false);
    const auto timings = dev_->kernel_timings();
    const auto gemm = std::find_if(timings.begin(), timings.end(),
                                   [](const KernelTiming& t) { return t.name == "gemm"; });
    ASSERT_NE(gemm, timings.end());
    EXPECT_EQ(gemm->calls, 1u);
    dev_->reset_timings();
}

// Sizes of zero, and shapes with no output, do nothing on every backend,
// with empty buffers too: no throw, no device error, nothing written.
TEST_P(BackendFaults, zero_sizes_and_empty_outputs_are_no_ops) {
    DeviceBuffer none;
    auto y = output(8);
    auto x = upload(random_vector(8, 1250));
    dev_->fill(*dq_, none, 1.0f, 0);
    dev_->copy_to_device(*dq_, none, 0, nullptr, 0);
    dev_->copy_to_host(*dq_, nullptr, none, 0, 0);
    dev_->activation(*dq_, Activation::Gelu, none, none, 0);
    dev_->axpby(*dq_, 0, 1.0f, none, 0.0f, none);
    dev_->gemm(*dq_, false, false, 0, 4, 4, 1.0f, none, 4, none, 4, 0.0f, none, 4);
    dev_->layer_norm(*dq_, 0, 8, 1e-5f, none, none, none, none);
    dev_->copy_rows(*dq_, 0, 4, x.dev, 0, 4, y.dev, 0, 4);
    dev_->transpose(*dq_, 0, 4, none, none);
    dev_->add_bias(*dq_, 0, 4, none, true, none);
    dev_->polar_spectrum(*dq_, 0, 4, 10.0f, none, none);
    dev_->rfft(*dq_, 256, 0, none, none);
    dev_->irfft(*dq_, 0, 3, none, none);
    dev_->frame_signal(*dq_, none, 4, 2, 0, none, none);
    dev_->overlap_add(*dq_, none, 4, 2, 0, none, none);
    dev_->complex_multiply(*dq_, none, none, none, 0);
    dev_->complex_exp(*dq_, none, none, 0);
    dev_->minimum_phase_fold(*dq_, 8, 0, none, none);
    dev_->gated_tanh(*dq_, 0, 8, none, none);
    dev_->gated_tanh(*dq_, 0, 3, 5, none, none);
    dev_->softmax_rows(*dq_, 0, 8, none, none);
    dev_->relative_attention_scores(*dq_, 0, 2, 4, 4, 1, 1.0f, none, none, none, none, none);
    dev_->relative_attention_values(*dq_, 1, 2, 0, 4, 1, none, none, none, none);
    dev_->broadcast_multiply(*dq_, 0, 4, none, true, none);
    // A kernel longer than the padded input: no output position.
    dev_->conv1d(*dq_, shape(1, 1, 1, 2, 5, 1, 1, 0, 1), x.dev, x.dev, DeviceBuffer{}, y.dev);
    dev_->conv1d(*dq_, shape(0, 1, 1, 4, 3, 1, 1, 0, 1), none, x.dev, DeviceBuffer{}, none);
    dev_->conv_transpose1d(*dq_, shape(1, 1, 1, 1, 1, 1, 1, 3, 1), x.dev, x.dev, DeviceBuffer{},
                           y.dev);
    dev_->synchronize(*dq_);
    expect_equal_to("y after no-op calls", y, std::vector<float>(8, 12345.0f), 0.0);
    EXPECT_EQ(dev_->health(), Health::Ok) << dev_->last_error();
}

TEST_P(BackendFaults, injected_kernel_failure_throws_once_and_marks_the_backend_failed) {
    const auto x = upload(random_vector(256, 1300));
    auto y = output(256);
    dev_->inject_fault({GpuFault::KernelFailure, 1, 0});
    EXPECT_THROW(dev_->activation(*dq_, Activation::Tanh, x.dev, y.dev, 256, 0.0f), DeviceError);
    EXPECT_EQ(dev_->health(), Health::Failed);
    EXPECT_FALSE(dev_->last_error().empty());
    dev_->reset_health();
    // One fault only: the next op runs.
    EXPECT_NO_THROW(dev_->activation(*dq_, Activation::Tanh, x.dev, y.dev, 256, 0.0f));
    EXPECT_NO_THROW(dev_->synchronize(*dq_));
    EXPECT_EQ(dev_->health(), Health::Ok);
}

TEST_P(BackendFaults, injected_out_of_memory_throws_once_for_allocations_and_ops) {
    dev_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(dev_->raw_allocate(1024), OutOfMemory);
    // Spent: allocations work again.
    void* h = dev_->raw_allocate(1024);
    dev_->raw_free(h);
    const auto a = upload(random_vector(16 * 16, 1400));
    auto c = output(16 * 16);
    dev_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(
        dev_->gemm(*dq_, false, false, 16, 16, 16, 1.0f, a.dev, 16, a.dev, 16, 0.0f, c.dev, 16),
        OutOfMemory);
    auto spec = output(2 * 65 * 2);
    dev_->inject_fault({GpuFault::OutOfMemory, 1, 0});
    EXPECT_THROW(dev_->rfft(*dq_, 128, 2, a.dev, spec.dev), OutOfMemory);
}

TEST_P(BackendFaults, injected_lateness_delays_the_op_but_not_its_result) {
    const auto x = upload(random_vector(4096, 1500));
    auto y = output(4096);
    constexpr double kDelayMs = 120;
    dev_->inject_fault({GpuFault::Late, 1, kDelayMs});
    const auto t0 = std::chrono::steady_clock::now();
    dev_->activation(*dq_, Activation::Sin, x.dev, y.dev, 4096, 0.0f);
    dev_->synchronize(*dq_);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ parity ] %-6s late fault of %.0f ms: op took %.1f ms\n", label(), kDelayMs, ms);
    EXPECT_GE(ms, 0.8 * kDelayMs);
    ref_.activation(*rq_, Activation::Sin, x.ref, y.ref, 4096, 0.0f);
    expect_close("sin after a late fault", y, tol_.elementwise);
}

TEST_P(BackendFaults, too_large_allocation_throws_out_of_memory_and_the_device_goes_on) {
    const std::size_t too_big =
        std::max<std::size_t>(dev_->info().global_memory * 2 + 4096, std::size_t{1} << 45);
    EXPECT_THROW(dev_->raw_allocate(too_big), OutOfMemory);
    EXPECT_THROW(dev_->allocate(too_big / sizeof(float), "huge"), OutOfMemory);
    // Running out is not a broken device: it goes on working.
    EXPECT_EQ(dev_->health(), Health::Ok);
    const auto x = upload(random_vector(1000, 1501));
    auto y = output(1000);
    ref_.activation(*rq_, Activation::Exp, x.ref, y.ref, 1000, 0.0f);
    dev_->activation(*dq_, Activation::Exp, x.dev, y.dev, 1000, 0.0f);
    expect_close("exp after a failed allocation", y, tol_.elementwise);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, BackendFaults, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace etude::gpu
