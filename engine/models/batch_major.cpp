#include "engine/models/batch_major.h"

#include <stdexcept>

namespace etude::engine {
namespace {

std::size_t at(std::size_t item, int channels, std::size_t length) {
    return item * static_cast<std::size_t>(channels) * length;
}

}  // namespace

BatchSignal BatchMajor::push(gpu::Queue& q, std::span<WeightedStreamLayer* const> layers,
                             const BatchSignal& in, JointScratch& joint, ScratchBuffer& out) {
    if (layers.empty() || in.batch != static_cast<int>(layers.size()) || in.length <= 0)
        throw std::invalid_argument("BatchMajor::push: one layer per item, and some input");
    WeightedStreamLayer& first = *layers[0];
    gpu::Backend& backend = first.backend_;
    const int channels = first.shape_.in_channels, hold = first.window_.hold_;
    if (in.channels != channels)
        throw std::invalid_argument("BatchMajor::push: input has the wrong channel count");
    for (WeightedStreamLayer* layer : layers)
        if (!layer->settled()) throw std::logic_error("BatchMajor::push: a layer is not settled");
    const int rows = in.batch * channels;
    const std::size_t m = static_cast<std::size_t>(in.length), H = static_cast<std::size_t>(hold);
    const std::size_t L = H + m;
    auto& window = joint.window.need(backend, at(layers.size(), channels, L));
    // [held | new input] per item, and the last `hold` columns held again
    // (before the activation, which works on the window in place: a layer
    // holds its raw input).
    if (hold > 0)
        for (std::size_t b = 0; b < layers.size(); ++b)
            backend.copy_rows(q, channels, hold, layers[b]->window_.tail_, 0, H, window,
                              at(b, channels, L), L);
    backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, window, H, L);
    if (hold > 0)
        for (std::size_t b = 0; b < layers.size(); ++b)
            backend.copy_rows(q, channels, hold, window, at(b, channels, L) + m, L,
                              layers[b]->window_.tail_, 0, H);
    if (first.slope_)
        backend.activation(q, gpu::Activation::LeakyRelu, window, window,
                           at(layers.size(), channels, L), *first.slope_);
    const int made = first.run_outputs(static_cast<int>(L));
    const int out_channels = first.shape_.out_channels;
    auto& made_buf =
        out.need(backend, at(layers.size(), out_channels, static_cast<std::size_t>(made)));
    if (layers.size() > 1) ++joint.batched_calls;
    first.launch(q, first.run_shape(in.batch, static_cast<int>(L)), window, made_buf);
    for (WeightedStreamLayer* layer : layers) layer->advance(in.length);
    return {&made_buf, in.batch, out_channels, made};
}

BatchSignal BatchMajor::delay(gpu::Queue& q, std::span<StreamDelay* const> delays,
                              const BatchSignal& in, JointScratch& joint, ScratchBuffer& out) {
    if (delays.empty() || in.batch != static_cast<int>(delays.size()) || in.length <= 0)
        throw std::invalid_argument("BatchMajor::delay: one delay per item, and some input");
    StreamDelay& first = *delays[0];
    gpu::Backend& backend = first.backend_;
    const int channels = first.channels_, d = first.delay_;
    if (in.channels != channels)
        throw std::invalid_argument("BatchMajor::delay: input has the wrong channel count");
    if (in.buffer == &out.get())
        throw std::invalid_argument("BatchMajor::delay: output buffer is the input's");
    for (StreamDelay* delay : delays)
        if (!delay->settled()) throw std::logic_error("BatchMajor::delay: a delay is not settled");
    const int rows = in.batch * channels;
    const std::size_t m = static_cast<std::size_t>(in.length), D = static_cast<std::size_t>(d);
    const std::size_t hold = std::max<std::size_t>(D, 1);  // the held samples' row stride
    const std::size_t n = in.floats();
    auto& o = out.need(backend, n);
    const BatchSignal result{&o, in.batch, channels, in.length};
    if (d == 0) {
        backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, o, 0, m);
        return result;
    }
    if (m >= D) {
        // Out: [held | in's first m - d]; held: in's last d.
        for (std::size_t b = 0; b < delays.size(); ++b)
            backend.copy_rows(q, channels, d, delays[b]->tail_[0], 0, hold, o, at(b, channels, m),
                              m);
        if (m > D) backend.copy_rows(q, rows, in.length - d, *in.buffer, 0, m, o, D, m);
        for (std::size_t b = 0; b < delays.size(); ++b)
            backend.copy_rows(q, channels, d, *in.buffer, at(b, channels, m) + (m - D), m,
                              delays[b]->tail_[0], 0, hold);
        return result;
    }
    // A chunk shorter than the delay: [held | in] lined up in the window,
    // its first m columns out, its last d held.
    const std::size_t L = D + m;
    auto& window = joint.window.need(backend, at(delays.size(), channels, L));
    for (std::size_t b = 0; b < delays.size(); ++b)
        backend.copy_rows(q, channels, d, delays[b]->tail_[0], 0, hold, window, at(b, channels, L),
                          L);
    backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, window, D, L);
    backend.copy_rows(q, rows, in.length, window, 0, L, o, 0, m);
    for (std::size_t b = 0; b < delays.size(); ++b)
        backend.copy_rows(q, channels, d, window, at(b, channels, L) + m, L, delays[b]->tail_[0], 0,
                          hold);
    return result;
}

}  // namespace etude::engine
