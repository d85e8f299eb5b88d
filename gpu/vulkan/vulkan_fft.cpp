// The Vulkan backend's FFTs: the mixed-radix Stockham passes of
// gpu/kernels/fft_bodies.h, one dispatch per factor of n, over the two
// scratch buffers of the queue. Chosen over VkFFT (Debian's libvkfft-dev) so
// that the transform is one more shared body, checked on the host, runs on
// any device that runs the other shaders, takes every length (the parity
// suite's 1000 and 1001 included) and needs no run-time shader compiler;
// docs/backends.md has the measurements behind the choice.
#include <cmath>
#include <numbers>
#include <vector>

#include "gpu/kernels/fft_bodies.h"
#include "gpu/vulkan/vulkan_backend_state.h"

namespace etude::gpu {

std::uint64_t VulkanBackend::twiddles(int n) {
    std::lock_guard lock(s_->fft_mu);
    vk::Allocation*& table = s_->twiddles[n];
    if (table) return table->address;
    // exp(-2 pi i e / n) for e < n, in double and rounded once.
    std::vector<float> roots(2 * std::size_t(n));
    for (int e = 0; e < n; ++e) {
        const double angle = 2.0 * std::numbers::pi * e / n;
        roots[2 * std::size_t(e)] = static_cast<float>(std::cos(angle));
        roots[2 * std::size_t(e) + 1] = static_cast<float>(-std::sin(angle));
    }
    vk::Allocation* made = vk::allocate_buffer(s_->device, roots.size() * sizeof(float), false);
    try {
        vk::CommandStream upload(s_->device, s_->pipelines, s_->frees);
        upload.upload(roots.data(), *made, 0, roots.size() * sizeof(float));
        std::vector<vk::TimedCommand> ignored;
        upload.finish(ignored);
    } catch (...) {
        vk::free_buffer(s_->device, made);
        s_->twiddles.erase(n);
        throw;
    }
    table = made;
    return table->address;
}

void VulkanBackend::run_fft(Queue& q, const char* op, int n, int batch, bool forward,
                            const DeviceBuffer& in, DeviceBuffer& out) {
    auto& s = begin(q, op);
    struct {
        std::uint64_t twiddles, in, out, rows;
        std::int32_t n, radix, span, load, store, inverse;
        float scale;
    } args{};
    guarded([&] {
        args.twiddles = twiddles(n);
        args.rows = std::uint64_t(batch);
        const std::vector<bodies::FftPass> passes = bodies::fft_passes(n, forward);
        const std::size_t scratch_bytes = std::size_t(n) * batch * 2 * sizeof(float);
        std::uint64_t scratch[2] = {0, 0};
        if (passes.size() > 1) scratch[0] = s.scratch(0, scratch_bytes);
        if (passes.size() > 2) scratch[1] = s.scratch(1, scratch_bytes);
        args.n = n;
        args.inverse = forward ? 0 : 1;
        args.scale = 1.0f / static_cast<float>(n);
        for (std::size_t i = 0; i < passes.size(); ++i) {
            args.radix = passes[i].radix;
            args.span = passes[i].span;
            args.load = passes[i].load;
            args.store = passes[i].store;
            args.in = i == 0 ? allocation_of(in).address : scratch[(i - 1) % 2];
            args.out = i + 1 == passes.size() ? allocation_of(out).address : scratch[i % 2];
            // x along the row, y over the rows (the shader loops past 65535).
            s.dispatch(vk::Kernel::FftPass, &args, sizeof args, std::uint32_t((n + 255) / 256),
                       std::uint32_t(std::min(batch, 65535)), op,
                       {{args.twiddles, args.in}, {args.out}});
        }
    });
}

void VulkanBackend::rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                              DeviceBuffer& out) {
    run_fft(q, "rfft", n, batch, true, in, out);
}

void VulkanBackend::irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                               DeviceBuffer& out) {
    run_fft(q, "irfft", n, batch, false, in, out);
}

}  // namespace etude::gpu
