// One parity suite for every backend: each test runs on every device the
// registry can open (the CPU backend, each OpenCL device such as PoCL, each
// CUDA GPU, each Vulkan device such as lavapipe), and compares the device's
// results with a separate CPU backend (the reference) or with values
// computed on the host from the definition. A kind with no device here (no
// OpenCL ICD, no Vulkan driver, a build without the CUDA module, no GPU)
// still gets one instance, which skips with the registry's note saying why.
//
// Errors are the largest error relative to the largest magnitude of the
// expected output, and each comparison prints the one it saw, so drifts show
// before they fail. Tolerances per device kind (tests/gpu/backend_parity.h):
//   CPU, OpenCL, 1e-6 element-wise and layout ops (within the OpenCL spec's
//   Vulkan       ULP bounds for exp/sin/cos/tanh/erf on any device; GLSL's
//                own are looser, so the Vulkan shaders take them from
//                gpu/kernels/device_math.h); 1e-5 sums whose order differs
//                from the CPU's (gemm, the convolutions, layer norm, FFTs:
//                see gpu/kernels/kernel_bodies.h).
//   CUDA         1e-5 and 1e-4: fast-math intrinsics are not used, but
//                cuBLAS and cuFFT choose their own algorithms and summation
//                orders. The suite passes within them on an H100 and an H200
//                (docs/benchmarks.md, "Second GPU run").
//   irfft(rfft(x)) == x on the device alone: 1e-5 everywhere.
// Builds without OpenCL compile this file too (opencl_devices.h is then a
// stub that finds no device), so nothing here names OpenClBackend itself.
// Comparisons with the CPU reference are skipped when the device under test
// is the CPU backend itself (tests/gpu/cpu_*_test.cpp check it against double
// precision); comparisons with a definition run everywhere.
#include "gpu/backend_parity.h"

#include "gpu/opencl/opencl_devices.h"
#include "gpu/vulkan/vulkan_devices.h"

namespace etude::gpu {
namespace {

TEST_P(BackendParity, device_describes_itself) {
    const DeviceInfo& info = dev_->info();
    EXPECT_EQ(info.kind, kind_);
    EXPECT_EQ(info.index, GetParam().index);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.global_memory, 0u);
    EXPECT_GT(info.compute_units, 0);
    const auto& caps = info.capabilities;
    const auto has = [&](const std::string& c) {
        return std::find(caps.begin(), caps.end(), c) != caps.end();
    };
    std::printf("[ parity ] %-6s %s (%s; %s)\n", label(), info.name.c_str(), info.platform.c_str(),
                info.driver.c_str());
    if (kind_ == BackendKind::Cpu) return;
    EXPECT_TRUE(has("fft"));
    EXPECT_TRUE(has("gemm"));
    if (kind_ == BackendKind::OpenCl) {
        std::vector<std::string> notes;
        const auto list = list_opencl_devices(notes);
        ASSERT_GT(list.size(), static_cast<std::size_t>(info.index));
        EXPECT_EQ(list[info.index].name, info.name);
        EXPECT_THROW(open_opencl_device(static_cast<int>(list.size())), DeviceError);
    } else if (kind_ == BackendKind::Vulkan) {
        std::vector<std::string> notes;
        const auto list = list_vulkan_devices(notes);
        ASSERT_GT(list.size(), static_cast<std::size_t>(info.index));
        EXPECT_EQ(list[info.index].name, info.name);
        EXPECT_EQ(info.platform.rfind("Vulkan 1.", 0), 0u) << info.platform;
        // Its type, which says whether "auto" may use it (a GPU) or not (lavapipe).
        const bool typed = has("discrete") || has("integrated") || has("virtual") || has("cpu");
        EXPECT_TRUE(typed);
        EXPECT_EQ(info.is_gpu, !has("cpu"));
        EXPECT_THROW(open_vulkan_device(static_cast<int>(list.size())), DeviceError);
    } else {
        EXPECT_TRUE(info.is_gpu);
        EXPECT_EQ(info.vendor, "NVIDIA");
        EXPECT_EQ(info.platform.rfind("CUDA ", 0), 0u) << info.platform;
        EXPECT_TRUE(std::any_of(caps.begin(), caps.end(),
                                [](const std::string& c) { return c.rfind("sm_", 0) == 0; }));
        EXPECT_TRUE(has("profiling"));
    }
}

TEST_P(BackendParity, fill_writes_the_value_and_nothing_past_it) {
    for (std::size_t n : {1u, 63u, 1000u, 1001u}) {
        auto y = output(n + 5);
        ref_.fill(*rq_, y.ref, -2.5f, n);
        dev_->fill(*dq_, y.dev, -2.5f, n);
        std::vector<float> want(n + 5, 12345.0f);
        std::fill(want.begin(), want.begin() + n, -2.5f);
        expect_equal_to("fill n=" + std::to_string(n), y, want, 0.0);
    }
}

TEST_P(BackendParity, copies_with_offsets_through_pinned_memory_touch_only_their_range) {
    const auto data = random_vector(1000, 1000);
    auto buf = dev_->allocate(1000, "test");
    dev_->fill(*dq_, buf, 0.0f, 1000);
    dev_->copy_to_device(*dq_, buf, 100, data.data() + 100, 500);
    PinnedBuffer pinned(dev_.get(), dev_->allocate_pinned(1000), 1000);
    std::fill(pinned.data(), pinned.data() + 1000, -1.0f);
    dev_->copy_to_host(*dq_, pinned.data() + 50, buf, 50, 600);
    dev_->synchronize(*dq_);
    for (int i = 0; i < 1000; ++i) {
        const float want = i < 50 || i >= 650 ? -1.0f : (i >= 100 && i < 600 ? data[i] : 0.0f);
        ASSERT_EQ(pinned.data()[i], want) << i;
    }
}

TEST_P(BackendParity, activations_match_the_cpu_in_and_out_of_place) {
    const Activation all[] = {Activation::LeakyRelu, Activation::Gelu, Activation::Tanh,
                              Activation::Exp,       Activation::Sin,  Activation::Cos};
    for (std::size_t n : {1u, 17u, 1000u, 4099u})
        for (Activation f : all) {
            const auto x = upload(random_vector(n, 7 + static_cast<unsigned>(n), -4.0f, 4.0f));
            auto y = output(n);
            ref_.activation(*rq_, f, x.ref, y.ref, n, 0.1f);
            dev_->activation(*dq_, f, x.dev, y.dev, n, 0.1f);
            expect_close(std::string(to_string(f)) + " n=" + std::to_string(n), y,
                         tol_.elementwise);
        }
    // Not a multiple of any work-group or block size; trig over several turns;
    // then in place on a prefix: the tail must stay untouched.
    const std::size_t n = 100003;
    for (Activation f : all) {
        const bool trig = f == Activation::Sin || f == Activation::Cos;
        auto x = upload(random_vector(n, 11 + static_cast<unsigned>(f), trig ? -10.0f : -4.0f,
                                      trig ? 10.0f : 4.0f));
        auto y = output(n);
        ref_.activation(*rq_, f, x.ref, y.ref, n, 0.1f);
        dev_->activation(*dq_, f, x.dev, y.dev, n, 0.1f);
        expect_close(std::string(to_string(f)) + " n=100003", y, tol_.elementwise);
        ref_.activation(*rq_, f, x.ref, x.ref, n - 17, 0.1f);
        dev_->activation(*dq_, f, x.dev, x.dev, n - 17, 0.1f);
        expect_close(std::string(to_string(f)) + " in place on a prefix", x, tol_.elementwise);
    }
}

TEST_P(BackendParity, gemm_matches_the_cpu_for_every_transpose_and_stride) {
    struct Case {
        int m, n, k, pad_a, pad_b, pad_c;
        float alpha, beta;
    };
    std::vector<Case> cases;
    for (auto [m, n, k] :
         std::initializer_list<T3>{{1, 1, 1}, {17, 33, 9}, {64, 48, 80}, {100, 37, 129}})
        for (int pad : {0, 3})
            for (float beta : {0.0f, 0.5f}) cases.push_back({m, n, k, pad, pad, pad, 0.75f, beta});
    for (auto [m, n, k] :
         std::initializer_list<T3>{{37, 53, 29}, {128, 96, 64}, {129, 67, 255}, {1, 300, 17}})
        cases.push_back({m, n, k, 3, 5, 2, 0.7f, 0.3f});
    unsigned seed = 100;
    for (const auto& c : cases)
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb) {
                // Stored shapes: A is m x k (k x m when transposed), B is k x n
                // (n x k), each row padded with unused floats.
                const int a_rows = ta ? c.k : c.m, a_cols = ta ? c.m : c.k;
                const int b_rows = tb ? c.n : c.k, b_cols = tb ? c.k : c.n;
                const int lda = a_cols + c.pad_a, ldb = b_cols + c.pad_b, ldc = c.n + c.pad_c;
                const auto a = upload(random_vector(std::size_t(a_rows) * lda, ++seed));
                const auto b = upload(random_vector(std::size_t(b_rows) * ldb, ++seed));
                auto y = upload(random_vector(std::size_t(c.m) * ldc, ++seed));
                ref_.gemm(*rq_, ta, tb, c.m, c.n, c.k, c.alpha, a.ref, lda, b.ref, ldb, c.beta,
                          y.ref, ldc);
                dev_->gemm(*dq_, ta, tb, c.m, c.n, c.k, c.alpha, a.dev, lda, b.dev, ldb, c.beta,
                           y.dev, ldc);
                char what[128];
                std::snprintf(what, sizeof what, "gemm %s%s m=%d n=%d k=%d lda=%d beta=%g",
                              ta ? "T" : "N", tb ? "T" : "N", c.m, c.n, c.k, lda, c.beta);
                // The whole of C, padding included: it must stay untouched.
                expect_close(what, y, tol_.reduction);
            }
}

TEST_P(BackendParity, conv1d_matches_the_cpu_for_stride_dilation_padding_and_groups) {
    std::vector<std::pair<Conv1dShape, int>> cases;  // shape, 0/1/2 = no bias/bias/both
    for (int stride : {1, 2})
        for (int dilation : {1, 3})
            for (int groups : {1, 2})
                cases.push_back({shape(2, 6, 4, 37, 5, stride, dilation, 3, groups), 2});
    cases.push_back({shape(1, 8, 8, 101, 7, 1, 1, 3, 8), 2});  // depthwise
    cases.push_back({shape(1, 3, 5, 16, 3, 1, 1, 0, 1), 2});   // unpadded
    cases.push_back({shape(2, 6, 10, 101, 5, 1, 1, 2, 1), 1});
    cases.push_back({shape(1, 8, 12, 257, 3, 2, 3, 4, 2), 0});
    cases.push_back({shape(3, 16, 16, 203, 7, 1, 1, 3, 16), 1});
    cases.push_back({shape(1, 64, 48, 1000, 7, 1, 5, 15, 1), 1});  // long sums
    cases.push_back({shape(2, 5, 7, 50, 4, 3, 1, 0, 1), 0});
    // 1x1 over a batch: CUDA's GEMM reads the windows as they are
    // (gpu/conv_as_gemm.h), without unfolding them.
    cases.push_back({shape(3, 12, 10, 40, 1, 1, 1, 0, 1), 2});
    unsigned seed = 200;
    for (const auto& [s, bias_mode] : cases)
        for (bool with_bias : {false, true}) {
            if ((bias_mode == 0 && with_bias) || (bias_mode == 1 && !with_bias)) continue;
            const int icg = s.in_channels / s.groups;
            const auto x =
                upload(random_vector(std::size_t(s.batch) * s.in_channels * s.in_length, ++seed));
            const auto w =
                upload(random_vector(std::size_t(s.out_channels) * icg * s.kernel, ++seed));
            const auto bias = with_bias ? upload(random_vector(s.out_channels, ++seed)) : Pair{};
            auto y = output(std::size_t(s.batch) * s.out_channels * s.conv_out_length());
            ref_.conv1d(*rq_, s, x.ref, w.ref, bias.ref, y.ref);
            dev_->conv1d(*dq_, s, x.dev, w.dev, bias.dev, y.dev);
            expect_close(describe("conv1d", s, with_bias), y, tol_.reduction);
        }
}

TEST_P(BackendParity, conv_transpose1d_matches_the_cpu_for_stride_dilation_padding_and_groups) {
    std::vector<std::pair<Conv1dShape, int>> cases;  // shape, 0/1/2 = no bias/bias/both
    for (auto [stride, taps, padding] : std::initializer_list<T3>{{8, 16, 4}, {2, 4, 1}, {3, 5, 0}})
        for (int groups : {1, 2})
            cases.push_back({shape(2, 6, 4, 19, taps, stride, 1, padding, groups), 2});
    cases.push_back({shape(1, 2, 3, 11, 3, 2, 3, 2, 1), 0});     // dilation
    cases.push_back({shape(1, 32, 16, 77, 16, 8, 1, 4, 1), 1});  // a HiFi-GAN upsampler
    cases.push_back({shape(2, 8, 6, 50, 5, 3, 2, 1, 2), 0});
    cases.push_back({shape(1, 4, 4, 33, 4, 2, 1, 1, 4), 1});  // depthwise
    cases.push_back({shape(1, 3, 5, 41, 3, 1, 1, 0, 1), 0});
    unsigned seed = 300;
    for (const auto& [s, bias_mode] : cases)
        for (bool with_bias : {false, true}) {
            if ((bias_mode == 0 && with_bias) || (bias_mode == 1 && !with_bias)) continue;
            const int ocg = s.out_channels / s.groups;
            const auto x =
                upload(random_vector(std::size_t(s.batch) * s.in_channels * s.in_length, ++seed));
            const auto w =
                upload(random_vector(std::size_t(s.in_channels) * ocg * s.kernel, ++seed));
            const auto bias = with_bias ? upload(random_vector(s.out_channels, ++seed)) : Pair{};
            auto y = output(std::size_t(s.batch) * s.out_channels * s.transpose_out_length());
            ref_.conv_transpose1d(*rq_, s, x.ref, w.ref, bias.ref, y.ref);
            dev_->conv_transpose1d(*dq_, s, x.dev, w.dev, bias.dev, y.dev);
            expect_close(describe("conv_transpose1d", s, with_bias), y, tol_.reduction);
        }
}

TEST_P(BackendParity, layer_norm_matches_the_cpu_with_an_offset_mean) {
    for (auto [rows, cols] : std::initializer_list<P2>{
             {1, 384}, {33, 384}, {1, 7}, {33, 7}, {37, 193}, {5, 1000}, {64, 80}, {3, 7}}) {
        // An offset mean makes the centring (the two-pass variance) matter.
        const auto x = upload(random_vector(std::size_t(rows) * cols, 500 + cols, 2.0f, 4.0f));
        const auto gamma = upload(random_vector(cols, 501, 0.5f, 1.5f));
        const auto beta = upload(random_vector(cols, 502));
        auto y = output(std::size_t(rows) * cols);
        ref_.layer_norm(*rq_, rows, cols, 1e-5f, x.ref, gamma.ref, beta.ref, y.ref);
        dev_->layer_norm(*dq_, rows, cols, 1e-5f, x.dev, gamma.dev, beta.dev, y.dev);
        expect_close("layer_norm rows=" + std::to_string(rows) + " cols=" + std::to_string(cols), y,
                     tol_.reduction);
    }
}

TEST_P(BackendParity, fft_matches_the_cpu_ignores_edge_imaginary_parts_and_inverts_itself) {
    // The sizes of the OpenCL suite, then those of the CUDA suite (odd
    // lengths, batches that are not powers of two). clFFT bakes a plan per
    // size, seconds each on PoCL, and handles only factors 2, 3, 5 and 7, so
    // OpenCL devices run the first list.
    std::vector<std::pair<int, int>> sizes = {{256, 1},  {256, 37}, {512, 1},
                                              {512, 37}, {1024, 1}, {1024, 37}};
    if (kind_ != BackendKind::OpenCl)
        sizes.insert(sizes.end(), {{512, 7}, {1000, 3}, {96, 5}, {2048, 1}, {1001, 2}});
    for (auto [n, batch] : sizes) {
        const std::size_t bins = std::size_t(n / 2 + 1) * 2;  // floats per spectrum
        const std::string size = " n=" + std::to_string(n) + " batch=" + std::to_string(batch);
        const auto signal = random_vector(std::size_t(n) * batch, 600 + n + batch);
        const auto x = upload(signal);
        auto spec = output(bins * batch);
        ref_.rfft(*rq_, n, batch, x.ref, spec.ref);
        dev_->rfft(*dq_, n, batch, x.dev, spec.dev);
        expect_close("rfft" + size, spec, tol_.reduction);
        expect_equal_to("rfft leaves its input intact" + size, x, signal, 0.0);

        // The inverse from the same (Hermitian) spectrum on both sides.
        const auto ref_spec = ref_data(spec);
        const auto s = upload(ref_spec);
        auto back = output(std::size_t(n) * batch);
        ref_.irfft(*rq_, n, batch, s.ref, back.ref);
        dev_->irfft(*dq_, n, batch, s.dev, back.dev);
        expect_close("irfft" + size, back, tol_.reduction);
        expect_equal_to("irfft leaves its input intact" + size, s, ref_spec, 0.0);

        // Imaginary parts at DC and Nyquist (as a network's spectrum may
        // have) are ignored: the result equals the one without them.
        auto raw = ref_spec;
        for (int b = 0; b < batch; ++b) {
            raw[b * bins + 1] = 0.5f;
            if (n % 2 == 0) raw[b * bins + bins - 1] = -0.75f;
        }
        const auto r = upload(raw);
        auto raw_back = output(std::size_t(n) * batch);
        ref_.irfft(*rq_, n, batch, r.ref, raw_back.ref);
        dev_->irfft(*dq_, n, batch, r.dev, raw_back.dev);
        expect_equal_to("irfft ignores imag(DC), imag(Nyquist)" + size, raw_back, ref_data(back),
                        tol_.reduction);

        // irfft(rfft(x)) == x on the device alone.
        auto round = output(std::size_t(n) * batch);
        dev_->irfft(*dq_, n, batch, spec.dev, round.dev);
        const double err = relative_error(signal, dev_data(round));
        std::printf("[ parity ] %-6s %-58s max rel err %.2e (tol %.0e)\n", label(),
                    ("irfft(rfft(x)) == x" + size).c_str(), err, tol_.round_trip);
        EXPECT_LE(err, tol_.round_trip) << size;
    }
}

TEST_P(BackendParity, axpby_matches_the_cpu_and_ignores_y_when_beta_is_zero) {
    for (std::size_t n : {1u, 63u, 1000u, 100003u}) {
        const auto xv = random_vector(n, 1600 + static_cast<unsigned>(n));
        const auto x = upload(xv);
        auto y = upload(random_vector(n, 1601 + static_cast<unsigned>(n)));
        ref_.axpby(*rq_, n, 1.5f, x.ref, -0.25f, y.ref);
        dev_->axpby(*dq_, n, 1.5f, x.dev, -0.25f, y.dev);
        expect_close("axpby alpha=1.5 beta=-0.25 n=" + std::to_string(n), y, tol_.elementwise);

        // beta == 0 overwrites: whatever y held (NaN here) must not leak through.
        auto z = upload(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
        ref_.axpby(*rq_, n, -2.0f, x.ref, 0.0f, z.ref);
        dev_->axpby(*dq_, n, -2.0f, x.dev, 0.0f, z.dev);
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i) want[i] = -2.0f * xv[i];
        expect_equal_to("axpby beta=0 over NaN n=" + std::to_string(n), z, want, 0.0);

        // In place (y = 0.5 y + 2 y) on a prefix: the tail stays as it was.
        auto w = upload(xv);
        const std::size_t prefix = n > 17 ? n - 17 : n;
        ref_.axpby(*rq_, prefix, 0.5f, w.ref, 2.0f, w.ref);
        dev_->axpby(*dq_, prefix, 0.5f, w.dev, 2.0f, w.dev);
        expect_close("axpby in place n=" + std::to_string(n), w, tol_.elementwise);
    }
}

// Row blocks between buffers with their own offsets and strides (the
// streaming vocoders keep each channel's tail this way); elements outside
// the block keep their sentinel.
TEST_P(BackendParity, copy_rows_moves_exactly_the_block) {
    struct Case {
        int rows, cols;
        std::size_t src_offset, src_stride, dst_offset, dst_stride;
    };
    for (Case c : {Case{1, 1, 0, 1, 0, 1}, Case{3, 5, 2, 9, 1, 7}, Case{64, 12, 100, 40, 0, 12},
                   Case{4, 6, 2, 6, 1, 6},  // rows end to end on both sides: one run
                   Case{5, 33, 7, 33, 3, 50},
                   // Large enough that the CPU backend splits the rows among its workers.
                   Case{300, 257, 11, 300, 5, 260}}) {
        const std::size_t src_n = c.src_offset + (c.rows - 1) * c.src_stride + c.cols + 3;
        const std::size_t dst_n = c.dst_offset + (c.rows - 1) * c.dst_stride + c.cols + 3;
        const auto xv = random_vector(src_n, 91);
        std::vector<float> want(dst_n, 12345.0f);
        for (int r = 0; r < c.rows; ++r)
            for (int k = 0; k < c.cols; ++k)
                want[c.dst_offset + r * c.dst_stride + k] = xv[c.src_offset + r * c.src_stride + k];
        const auto x = upload(xv);
        auto y = output(dst_n);
        ref_.copy_rows(*rq_, c.rows, c.cols, x.ref, c.src_offset, c.src_stride, y.ref, c.dst_offset,
                       c.dst_stride);
        dev_->copy_rows(*dq_, c.rows, c.cols, x.dev, c.src_offset, c.src_stride, y.dev,
                        c.dst_offset, c.dst_stride);
        expect_equal_to("copy_rows " + std::to_string(c.rows) + "x" + std::to_string(c.cols), y,
                        want, 0.0);
    }
}

TEST_P(BackendParity, transpose_moves_every_element) {
    // Tile-sized, ragged on either side, single rows or columns, and large.
    for (auto [rows, cols] : std::initializer_list<P2>{{1, 1},
                                                       {1, 100},
                                                       {100, 1},
                                                       {37, 65},
                                                       {64, 64},
                                                       {17, 300},
                                                       {1, 1000},
                                                       {1000, 1},
                                                       {256, 512},
                                                       {33, 3000}}) {
        std::vector<float> xv(std::size_t(rows) * cols), want(xv.size());
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) {
                // Each value is its own position (exact in float at these sizes).
                xv[std::size_t(r) * cols + c] = static_cast<float>(r * 4096 + c);
                want[std::size_t(c) * rows + r] = static_cast<float>(r * 4096 + c);
            }
        const auto x = upload(xv);
        auto y = output(xv.size());
        ref_.transpose(*rq_, rows, cols, x.ref, y.ref);
        dev_->transpose(*dq_, rows, cols, x.dev, y.dev);
        expect_equal_to("transpose " + std::to_string(rows) + "x" + std::to_string(cols), y, want,
                        0.0);
    }
}

TEST_P(BackendParity, add_bias_adds_per_row_and_per_column) {
    for (auto [rows, cols] : std::initializer_list<P2>{{19, 70}, {129, 77}}) {
        const auto yv = random_vector(std::size_t(rows) * cols, 1700);
        for (bool per_row : {true, false}) {
            const auto bv = random_vector(per_row ? rows : cols, per_row ? 1701 : 1702);
            std::vector<float> want(yv.size());
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c)
                    want[std::size_t(r) * cols + c] =
                        yv[std::size_t(r) * cols + c] + (per_row ? bv[r] : bv[c]);
            const auto b = upload(bv);
            auto y = upload(yv);
            ref_.add_bias(*rq_, rows, cols, b.ref, per_row, y.ref);
            dev_->add_bias(*dq_, rows, cols, b.dev, per_row, y.dev);
            expect_equal_to("add_bias " + std::to_string(rows) + "x" + std::to_string(cols) +
                                (per_row ? " per row" : " per column"),
                            y, want, 0.0);
        }
    }
}

TEST_P(BackendParity, polar_spectrum_matches_the_cpu_with_the_magnitude_clamped) {
    for (auto [frames, bins] :
         std::initializer_list<P2>{{1, 33}, {1, 513}, {9, 33}, {9, 513}, {100, 513}, {7, 1}}) {
        // Log-magnitudes in [-6, 6] (above log 100 = 4.6 the clamp applies),
        // phases over several turns.
        std::vector<float> xv(std::size_t(frames) * 2 * bins);
        const auto lm = random_vector(std::size_t(frames) * bins, 1800 + bins, -6.0f, 6.0f);
        const auto ph = random_vector(std::size_t(frames) * bins, 1801 + bins, -20.0f, 20.0f);
        for (int f = 0; f < frames; ++f)
            for (int k = 0; k < bins; ++k) {
                xv[std::size_t(f) * 2 * bins + k] = lm[std::size_t(f) * bins + k];
                xv[std::size_t(f) * 2 * bins + bins + k] = ph[std::size_t(f) * bins + k];
            }
        const auto x = upload(xv);
        auto y = output(xv.size());
        ref_.polar_spectrum(*rq_, frames, bins, 100.0f, x.ref, y.ref);
        dev_->polar_spectrum(*dq_, frames, bins, 100.0f, x.dev, y.dev);
        expect_close(
            "polar_spectrum frames=" + std::to_string(frames) + " bins=" + std::to_string(bins), y,
            tol_.elementwise);
    }
}

TEST_P(BackendParity, framing_and_overlap_add_match_the_cpu_with_overlaps_and_gaps) {
    // Overlapping frames, odd sizes, exact tiling, and gaps between frames.
    for (auto [n_fft, hop, n_frames] : std::initializer_list<T3>{{512, 128, 9},
                                                                 {37, 10, 7},
                                                                 {16, 20, 4},
                                                                 {64, 64, 1},
                                                                 {400, 100, 13},
                                                                 {64, 64, 4},
                                                                 {64, 100, 5}}) {
        const std::size_t len = std::size_t(n_frames - 1) * hop + n_fft;
        const std::string size = " n_fft=" + std::to_string(n_fft) + " hop=" + std::to_string(hop) +
                                 " frames=" + std::to_string(n_frames);
        const auto signal = upload(random_vector(len, 700 + n_fft));
        const auto window = upload(random_vector(n_fft, 701, 0.0f, 1.0f));
        auto frames = output(std::size_t(n_fft) * n_frames);
        ref_.frame_signal(*rq_, signal.ref, n_fft, hop, n_frames, window.ref, frames.ref);
        dev_->frame_signal(*dq_, signal.dev, n_fft, hop, n_frames, window.dev, frames.dev);
        expect_close("frame_signal" + size, frames, tol_.elementwise);

        auto out = output(len);  // the sentinel first: overlap_add overwrites
        ref_.overlap_add(*rq_, frames.ref, n_fft, hop, n_frames, window.ref, out.ref);
        dev_->overlap_add(*dq_, frames.dev, n_fft, hop, n_frames, window.dev, out.dev);
        expect_close("overlap_add" + size, out, tol_.elementwise);
    }
}

TEST_P(BackendParity, complex_multiply_and_exp_match_the_cpu) {
    for (std::size_t n : {1u, 257u, 1000u, 1003u}) {
        const auto a = upload(random_vector(2 * n, 800 + static_cast<unsigned>(n)));
        const auto b = upload(random_vector(2 * n, 801 + static_cast<unsigned>(n)));
        auto c = output(2 * n);
        ref_.complex_multiply(*rq_, a.ref, b.ref, c.ref, n);
        dev_->complex_multiply(*dq_, a.dev, b.dev, c.dev, n);
        expect_close("complex_multiply n=" + std::to_string(n), c, tol_.elementwise);

        // Log-magnitudes in [-3, 3], phases over several turns.
        std::vector<float> x = random_vector(2 * n, 802 + static_cast<unsigned>(n), -3.0f, 3.0f);
        for (std::size_t i = 1; i < x.size(); i += 2) x[i] *= 4.0f;
        const auto xs = upload(x);
        auto y = output(2 * n);
        ref_.complex_exp(*rq_, xs.ref, y.ref, n);
        dev_->complex_exp(*dq_, xs.dev, y.dev, n);
        expect_close("complex_exp n=" + std::to_string(n), y, tol_.elementwise);
    }
}

TEST_P(BackendParity, minimum_phase_fold_matches_the_cpu) {
    for (auto [n, batch] :
         std::initializer_list<P2>{{512, 1}, {512, 3}, {37, 1}, {37, 3}, {37, 2}, {1000, 1}}) {
        const auto x = upload(random_vector(std::size_t(n) * batch, 900 + n));
        auto y = output(std::size_t(n) * batch);
        ref_.minimum_phase_fold(*rq_, n, batch, x.ref, y.ref);
        dev_->minimum_phase_fold(*dq_, n, batch, x.dev, y.dev);
        expect_close(
            "minimum_phase_fold n=" + std::to_string(n) + " batch=" + std::to_string(batch), y,
            tol_.elementwise);
    }
}

// WaveNet's gate (VITS' flow): tanh of each item's first half times the
// sigmoid of its second, against the definition in double. The CPU's is a
// SIMD loop with a scalar tail (libmvec), so the lengths leave every tail
// (and a batch's items end mid-vector); the wide inputs saturate both
// functions (exp(-b) overflows to inf for b < -88). One item through the
// five-argument form, batches of 3 (odd sizes) through the batch form.
TEST_P(BackendParity, gated_tanh_is_tanh_times_sigmoid) {
    for (auto [batch, channels, length, range] :
         std::initializer_list<std::tuple<int, int, int, float>>{{1, 1, 1, 6.0f},
                                                                 {1, 4, 37, 6.0f},
                                                                 {1, 192, 140, 6.0f},
                                                                 {1, 7, 1001, 6.0f},
                                                                 {1, 3, 45, 200.0f},
                                                                 {1, 5, 203, 200.0f},
                                                                 {3, 1, 1, 6.0f},
                                                                 {3, 5, 37, 6.0f},
                                                                 {3, 96, 17, 6.0f},
                                                                 {3, 7, 203, 200.0f}}) {
        const std::size_t n = std::size_t(channels) * length;  // an item's outputs
        const auto v =
            random_vector(2 * n * batch, 1700 + channels + 31 * (batch - 1), -range, range);
        std::vector<float> want(n * batch);
        for (std::size_t item = 0; item < std::size_t(batch); ++item)
            for (std::size_t i = 0; i < n; ++i) {
                const double a = v[2 * n * item + i], b = v[2 * n * item + n + i];
                want[n * item + i] = float(std::tanh(a) / (1.0 + std::exp(-b)));
            }
        const auto x = upload(v);
        auto y = output(n * batch);
        if (batch == 1) {
            ref_.gated_tanh(*rq_, channels, length, x.ref, y.ref);
            dev_->gated_tanh(*dq_, channels, length, x.dev, y.dev);
        } else {
            ref_.gated_tanh(*rq_, batch, channels, length, x.ref, y.ref);
            dev_->gated_tanh(*dq_, batch, channels, length, x.dev, y.dev);
        }
        expect_equal_to("gated_tanh " + std::to_string(batch) + "x" + std::to_string(channels) +
                            "x" + std::to_string(length),
                        y, want, tol_.elementwise);
    }
}

// gpu::Backend checks arguments once for every backend, before anything is
// queued (on a GPU an out-of-bounds access corrupts the context).
TEST_P(BackendParity, queues_on_several_threads_give_the_same_result) {
    const auto a = random_vector(48 * 40, 1200);
    const auto b = random_vector(40 * 56, 1201);
    std::vector<float> ref(48 * 56);
    {
        auto ca = ref_.allocate(a.size(), "t"), cb = ref_.allocate(b.size(), "t"),
             cc = ref_.allocate(ref.size(), "t");
        ref_.copy_to_device(*rq_, ca, 0, a.data(), a.size());
        ref_.copy_to_device(*rq_, cb, 0, b.data(), b.size());
        ref_.gemm(*rq_, false, false, 48, 56, 40, 1.0f, ca, 40, cb, 56, 0.0f, cc, 56);
        ref_.copy_to_host(*rq_, ref.data(), cc, 0, ref.size());
    }
    std::vector<double> errors(4, 1.0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            auto q = dev_->create_queue();
            auto da = dev_->allocate(a.size(), "t"), db = dev_->allocate(b.size(), "t"),
                 dc = dev_->allocate(ref.size(), "t");
            std::vector<float> got(ref.size());
            dev_->copy_to_device(*q, da, 0, a.data(), a.size());
            dev_->copy_to_device(*q, db, 0, b.data(), b.size());
            for (int rep = 0; rep < 10; ++rep)
                dev_->gemm(*q, false, false, 48, 56, 40, 1.0f, da, 40, db, 56, 0.0f, dc, 56);
            dev_->copy_to_host(*q, got.data(), dc, 0, got.size());
            dev_->synchronize(*q);
            errors[t] = relative_error(ref, got);
        });
    for (auto& th : threads) th.join();
    for (double e : errors) EXPECT_LE(e, tol_.reduction);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, BackendParity, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace etude::gpu
