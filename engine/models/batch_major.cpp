#include "engine/models/batch_major.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <vector>

namespace etude::engine {
namespace {

std::size_t at(std::size_t item, int channels, std::size_t length) {
    return item * static_cast<std::size_t>(channels) * length;
}

// Each item's held samples ([channels][stride] at places[b]) to or from
// `cols` columns of item b of a batch buffer ([channels][length] items,
// from column `col`): one copy per run of items whose places lie one after
// another in one buffer (neighbouring slots, HeldSlots), one per item where
// each has its own.
void copy_held(gpu::Backend& backend, gpu::Queue& q, const std::vector<HeldPlace>& places,
               int channels, int cols, std::size_t stride, gpu::DeviceBuffer& batch,
               std::size_t col, std::size_t length, bool into_batch) {
    const std::size_t region = static_cast<std::size_t>(channels) * stride;
    for (std::size_t b = 0; b < places.size();) {
        std::size_t e = b + 1;
        while (e < places.size() && places[e].buffer == places[b].buffer &&
               places[e].at == places[b].at + (e - b) * region)
            ++e;
        const int rows = static_cast<int>(e - b) * channels;
        if (into_batch)
            backend.copy_rows(q, rows, cols, *places[b].buffer, places[b].at, stride, batch,
                              at(b, channels, length) + col, length);
        else
            backend.copy_rows(q, rows, cols, batch, at(b, channels, length) + col, length,
                              *places[b].buffer, places[b].at, stride);
        b = e;
    }
}

}  // namespace

int HeldSlots::slots_per_page(const gpu::Backend& backend) {
    return backend.info().kind == gpu::BackendKind::OpenCl ? 1 : kPage;
}

HeldSlots::HeldSlots(gpu::Backend& backend)
    : backend_(backend), page_slots_(slots_per_page(backend)) {}

HeldSlots::Slot::Slot(HeldSlots& slots) : slots_(slots) {
    std::lock_guard lock(slots_.mu_);
    for (page_ = 0; page_ < slots_.pages_.size(); ++page_) {
        auto& used = slots_.pages_[page_]->used;
        for (index_ = 0; index_ < slots_.page_slots_; ++index_)
            if (!used[static_cast<std::size_t>(index_)]) {
                used[static_cast<std::size_t>(index_)] = true;
                return;
            }
    }
    slots_.pages_.push_back(std::make_unique<Page>(slots_.page_slots_));
    index_ = 0;
    slots_.pages_.back()->used[0] = true;
}

HeldSlots::Slot::~Slot() {
    std::lock_guard lock(slots_.mu_);
    slots_.pages_[page_]->used[static_cast<std::size_t>(index_)] = false;
}

HeldPlace HeldSlots::Slot::place(std::size_t floats) {
    std::lock_guard lock(slots_.mu_);
    Page& page = *slots_.pages_[page_];
    const std::size_t k = next_++;
    if (k == page.buffers.size()) {
        page.buffers.push_back(std::make_unique<gpu::DeviceBuffer>(slots_.backend_.allocate(
            floats * static_cast<std::size_t>(slots_.page_slots_), "vocoder stream state")));
        page.floats.push_back(floats);
    }
    if (k >= page.buffers.size() || page.floats[k] != floats)
        throw std::logic_error("HeldSlots: a stream's layers differ from its network's others'");
    return {page.buffers[k].get(), floats * static_cast<std::size_t>(index_)};
}

std::vector<std::size_t> BatchMajor::steady_batch(
    std::size_t count, const std::function<bool(std::size_t)>& steady,
    const std::function<int(std::size_t)>& length,
    const std::function<const HeldSlots::Slot*(std::size_t)>& slot) {
    std::map<int, std::size_t> of_length;
    for (std::size_t i = 0; i < count; ++i)
        if (steady(i)) ++of_length[length(i)];
    int most_pushed = 0;
    std::size_t most = 0;
    for (const auto& [len, n] : of_length)
        if (n > most) {
            most_pushed = len;
            most = n;
        }
    std::vector<std::size_t> batch;
    if (most < 2) return batch;
    for (std::size_t i = 0; i < count; ++i)
        if (steady(i) && length(i) == most_pushed) batch.push_back(i);
    const auto order = [&](std::size_t i) {
        const HeldSlots::Slot* s = slot(i);
        return s ? s->order() : std::pair<std::size_t, int>(SIZE_MAX, 0);
    };
    std::stable_sort(batch.begin(), batch.end(),
                     [&](std::size_t a, std::size_t b) { return order(a) < order(b); });
    return batch;
}

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
    std::vector<HeldPlace> held;
    for (WeightedStreamLayer* layer : layers)
        held.push_back({&layer->window_.tail(), layer->window_.tail_at()});
    if (hold > 0) copy_held(backend, q, held, channels, hold, H, window, 0, L, true);
    backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, window, H, L);
    if (hold > 0) copy_held(backend, q, held, channels, hold, H, window, m, L, false);
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
    std::vector<HeldPlace> held;
    for (StreamDelay* delay : delays) held.push_back({&delay->tail(), delay->tail_at()});
    if (m >= D) {
        // Out: [held | in's first m - d]; held: in's last d.
        copy_held(backend, q, held, channels, d, hold, o, 0, m, true);
        if (m > D) backend.copy_rows(q, rows, in.length - d, *in.buffer, 0, m, o, D, m);
        copy_held(backend, q, held, channels, d, hold, *in.buffer, m - D, m, false);
        return result;
    }
    // A chunk shorter than the delay: [held | in] lined up in the window,
    // its first m columns out, its last d held.
    const std::size_t L = D + m;
    auto& window = joint.window.need(backend, at(delays.size(), channels, L));
    copy_held(backend, q, held, channels, d, hold, window, 0, L, true);
    backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, window, D, L);
    backend.copy_rows(q, rows, in.length, window, 0, L, o, 0, m);
    copy_held(backend, q, held, channels, d, hold, window, m, L, false);
    return result;
}

}  // namespace etude::engine
