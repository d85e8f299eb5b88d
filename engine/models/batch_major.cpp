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
// from column `col`). Where the batch copies by slot index
// (joint.indexed_slots, SlotIndexed), one gather or scatter by the index on
// the device, which a recording replays for any members in those slots'
// page. Else one copy per run of items whose places lie one after another
// in one buffer (neighbouring slots, HeldSlots), one per item where each
// has its own.
void copy_held(gpu::Backend& backend, gpu::Queue& q, const std::vector<HeldPlace>& places,
               int channels, int cols, std::size_t stride, gpu::DeviceBuffer& batch,
               std::size_t col, std::size_t length, bool into_batch, JointScratch& joint) {
    if (!joint.indexed_slots.empty()) {
        const HeldPlace& first = places[0];
        const std::size_t within =
            first.at - static_cast<std::size_t>(std::max(first.slot, 0)) * first.slot_floats;
        bool fits = places.size() == joint.indexed_slots.size() && first.slot >= 0;
        for (std::size_t b = 0; fits && b < places.size(); ++b) {
            const HeldPlace& p = places[b];
            fits = p.buffer == first.buffer && p.slot == joint.indexed_slots[b] &&
                   p.slot_floats == first.slot_floats &&
                   p.at == within + static_cast<std::size_t>(p.slot) * p.slot_floats;
        }
        // A recording keyed by the page alone must not hold copies that
        // name its members' places.
        if (!fits)
            throw std::logic_error(
                "BatchMajor: a batch copied by slot index has a place outside "
                "its members' slots");
        const gpu::Backend::SlotRows rows{static_cast<int>(places.size()),
                                          channels,
                                          cols,
                                          within,
                                          first.slot_floats,
                                          stride,
                                          first.slots,
                                          col,
                                          length};
        if (into_batch)
            backend.gather_slot_rows(q, rows, joint.slot_index.get(), *first.buffer, batch);
        else
            backend.scatter_slot_rows(q, rows, joint.slot_index.get(), batch, *first.buffer);
        return;
    }
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

// Throws `what` unless every layer (or delay) is in the first one's state:
// a batch item is then the computation its own push would make.
template <class Layer>
void same_state(std::span<Layer* const> layers, const char* what) {
    std::vector<long> want, got;
    layers[0]->push_state(want);
    for (const Layer* layer : layers.subspan(1)) {
        got.clear();
        layer->push_state(got);
        if (got != want) throw std::logic_error(what);
    }
}

}  // namespace

int HeldSlots::slots_per_page(const gpu::DeviceInfo& info) {
    if (info.kind == gpu::BackendKind::OpenCl) return 1;
    return info.is_gpu && info.global_memory >= kLargeDeviceBytes ? kLargePage : kPage;
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
    return {page.buffers[k].get(), floats * static_cast<std::size_t>(index_), index_,
            slots_.page_slots_, floats};
}

SlotIndexed::SlotIndexed(JointScratch& joint, std::vector<int> slots) : joint_(joint) {
    if (slots.empty() || !joint_.indexed_slots.empty())
        throw std::logic_error("SlotIndexed: no slots, or a batch indexed already");
    for (int slot : slots) index_.push_back(static_cast<float>(slot));
    joint_.indexed_slots = std::move(slots);
}

void SlotIndexed::upload(gpu::Backend& backend, gpu::Queue& q) {
    backend.copy_to_device(q, joint_.slot_index.need(backend, index_.size()), 0, index_.data(),
                           index_.size());
}

std::vector<std::vector<std::size_t>> BatchMajor::same_state_groups(
    std::size_t count, const std::function<bool(std::size_t)>& may,
    const std::function<PushState(std::size_t)>& state,
    const std::function<const HeldSlots::Slot*(std::size_t)>& slot, std::size_t min_size) {
    // (A map of whole states: a flow's is some 50 numbers, a decoder's some
    // 100, next to thousands of operations a push.)
    std::map<PushState, std::vector<std::size_t>> of_state;
    for (std::size_t i = 0; i < count; ++i)
        if (may(i)) of_state[state(i)].push_back(i);
    std::vector<std::vector<std::size_t>> groups;
    for (auto& [key, group] : of_state)
        if (group.size() >= min_size) groups.push_back(std::move(group));
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.size() > b.size(); });
    const auto order = [&](std::size_t i) {
        const HeldSlots::Slot* s = slot(i);
        return s ? s->order() : std::pair<std::size_t, int>(SIZE_MAX, 0);
    };
    for (auto& group : groups)
        std::stable_sort(group.begin(), group.end(),
                         [&](std::size_t a, std::size_t b) { return order(a) < order(b); });
    return groups;
}

bool BatchMajor::biases_differ(std::span<WeightedStreamLayer* const> layers) {
    const WeightedStreamLayer& first = *layers[0];
    bool differ = false;
    for (const WeightedStreamLayer* layer : layers.subspan(1)) {
        if (layer->weight_.handle() != first.weight_.handle())
            throw std::logic_error("BatchMajor::push: the layers have different weights");
        if (static_cast<bool>(layer->bias_) != static_cast<bool>(first.bias_))
            throw std::logic_error("BatchMajor::push: biases on some layers only");
        differ = differ || !layer->same_weights_and_bias(first);
    }
    return differ;
}

const gpu::DeviceBuffer& BatchMajor::item_biases(gpu::Queue& q,
                                                 std::span<WeightedStreamLayer* const> layers,
                                                 JointScratch& joint) {
    const WeightedStreamLayer& first = *layers[0];
    const std::size_t c = static_cast<std::size_t>(first.shape_.out_channels);
    auto& gathered = joint.item_bias.need(first.backend_, c * layers.size());
    // From the copies the streams keep in their slots (hold_bias): one copy
    // per run of neighbours, and a recording reads the slots, not the
    // networks. Else one copy per item from its network's bias.
    std::vector<HeldPlace> places;
    for (const WeightedStreamLayer* layer : layers)
        if (layer->bias_place_.buffer) places.push_back(layer->bias_place_);
    if (places.size() == layers.size()) {
        copy_held(first.backend_, q, places, 1, static_cast<int>(c), c, gathered, 0, c, true,
                  joint);
        return gathered;
    }
    // (A recording keyed without its members must not name their networks'
    // biases: a batch copied by slot index reads them from the slots.)
    if (!joint.indexed_slots.empty())
        throw std::logic_error(
            "BatchMajor: a batch copied by slot index has a bias outside "
            "its members' slots");
    for (std::size_t b = 0; b < layers.size(); ++b)
        first.backend_.copy_rows(q, 1, static_cast<int>(c), layers[b]->bias_, 0, c, gathered, b * c,
                                 c);
    return gathered;
}

BatchSignal BatchMajor::push(gpu::Queue& q, std::span<WeightedStreamLayer* const> layers,
                             const BatchSignal& in, bool flush, JointScratch& joint,
                             ScratchBuffer& out) {
    if (layers.empty() || in.batch != static_cast<int>(layers.size()) || in.length < 0)
        throw std::invalid_argument("BatchMajor::push: one layer per item");
    WeightedStreamLayer& first = *layers[0];
    gpu::Backend& backend = first.backend_;
    const int channels = first.shape_.in_channels, hold = first.window_.hold_;
    if (in.channels != channels)
        throw std::invalid_argument("BatchMajor::push: input has the wrong channel count");
    same_state(layers, "BatchMajor::push: the layers are in different states");
    const bool own_biases = biases_differ(layers);
    const int rows = in.batch * channels, out_channels = first.shape_.out_channels;
    // The push every layer would make alone (the same for each: one state),
    // its window [held | new input | a flush's zeros] per item.
    const WeightedStreamLayer::Staged st = first.plan(in.length, flush);
    const int held = first.window_.held_;
    const int h = std::abs(held), L = st.length;
    const std::size_t m = static_cast<std::size_t>(in.length), H = static_cast<std::size_t>(h);
    const std::size_t stride = static_cast<std::size_t>(std::max(hold, 1));  // held rows'
    const std::size_t cols = static_cast<std::size_t>(L);
    if (L > 0) {
        auto& window = joint.window.need(backend, at(layers.size(), channels, cols));
        std::vector<HeldPlace> places;
        for (WeightedStreamLayer* layer : layers) places.push_back(layer->window_.held_place());
        // A fresh signal holds the prefill's zeros (InputWindow::reset),
        // and a flush appends zeros after the input (the signal's right
        // padding): one fill for the batch, the held samples and the input
        // then copied over their parts.
        if (held < 0 || flush) backend.fill(q, window, 0.0f, at(layers.size(), channels, cols));
        if (held > 0)
            copy_held(backend, q, places, channels, h, stride, window, 0, cols, true, joint);
        if (m > 0) backend.copy_rows(q, rows, in.length, *in.buffer, 0, m, window, H, cols);
        // The last `hold` columns (or all, while the window fills) held
        // again, before the activation, which works on the window in place:
        // a layer holds its raw input.
        const int keep = std::min(L, hold);
        if (keep > 0)
            copy_held(backend, q, places, channels, keep, stride, window,
                      static_cast<std::size_t>(L - keep), cols, false, joint);
    }
    for (WeightedStreamLayer* layer : layers) layer->advance(in.length, flush);
    if (st.count <= 0) return {&out.need(backend, 1), in.batch, out_channels, 0};
    auto& window = joint.window.get();
    if (first.slope_)
        backend.activation(q, gpu::Activation::LeakyRelu, window, window,
                           at(layers.size(), channels, cols), *first.slope_);
    const int made = first.run_outputs(L);
    const std::size_t n = static_cast<std::size_t>(st.count);
    const gpu::Conv1dShape shape = first.run_shape(in.batch, L);
    if (layers.size() > 1) ++joint.batched_calls;
    const auto launch = [&](gpu::DeviceBuffer& made_buf, std::size_t outputs) {
        if (!own_biases) {
            first.launch(q, shape, window, made_buf);
            return;
        }
        // Items of other speakers: the call without a bias, then each
        // item's own added ([batch][out_channels] rows of `outputs`).
        static const gpu::DeviceBuffer no_bias;
        const gpu::DeviceBuffer& biases = item_biases(q, layers, joint);
        first.launch(q, shape, window, no_bias, made_buf);
        backend.add_bias(q, in.batch * out_channels, static_cast<int>(outputs), biases, true,
                         made_buf);
    };
    if (st.first == 0 && st.count == made) {
        auto& made_buf = out.need(backend, at(layers.size(), out_channels, n));
        launch(made_buf, n);
        return {&made_buf, in.batch, out_channels, made};
    }
    // An upsampler's first outputs, which lie before the signal's start,
    // dropped: made in joint.out, the rest handed out.
    const std::size_t M = static_cast<std::size_t>(made);
    auto& made_buf = joint.out.need(backend, at(layers.size(), out_channels, M));
    launch(made_buf, M);
    auto& handed = out.need(backend, at(layers.size(), out_channels, n));
    backend.copy_rows(q, in.batch * out_channels, static_cast<int>(st.count), made_buf,
                      static_cast<std::size_t>(st.first), M, handed, 0, n);
    return {&handed, in.batch, out_channels, static_cast<int>(st.count)};
}

BatchSignal BatchMajor::delay(gpu::Queue& q, std::span<StreamDelay* const> delays,
                              const BatchSignal& in, bool flush, JointScratch& joint,
                              ScratchBuffer& out) {
    if (delays.empty() || in.batch != static_cast<int>(delays.size()) || in.length < 0)
        throw std::invalid_argument("BatchMajor::delay: one delay per item");
    StreamDelay& first = *delays[0];
    gpu::Backend& backend = first.backend_;
    const int channels = first.channels_, d = first.delay_;
    if (in.channels != channels)
        throw std::invalid_argument("BatchMajor::delay: input has the wrong channel count");
    if (in.buffer == &out.get())
        throw std::invalid_argument("BatchMajor::delay: output buffer is the input's");
    same_state(delays, "BatchMajor::delay: the delays are in different states");
    const int rows = in.batch * channels;
    // StreamDelay::push()'s arithmetic, the same for every item: of
    // [held | in], the first n go out (all at a flush), the rest is held.
    const int h = first.held_, m = in.length, total = h + m;
    const int n = first.handed_out(total, flush), keep = total - n;
    const int from_held = std::min(h, n), old_part = std::max(h - n, 0);
    const std::size_t M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n);
    const std::size_t stride = static_cast<std::size_t>(std::max(d, 1));  // held rows'
    auto& o = out.need(backend, std::max<std::size_t>(at(delays.size(), channels, N), 1));
    const BatchSignal result{&o, in.batch, channels, n};
    std::vector<HeldPlace> places;
    for (StreamDelay* delay : delays) places.push_back(delay->held_place());
    // Out: [held's first from_held | in's first n - from_held].
    if (from_held > 0)
        copy_held(backend, q, places, channels, from_held, stride, o, 0, N, true, joint);
    if (n > from_held)
        backend.copy_rows(q, rows, n - from_held, *in.buffer, 0, M, o,
                          static_cast<std::size_t>(from_held), N);
    if (keep > 0 && old_part == 0) {
        // Held: in's last `keep`, straight from the input.
        copy_held(backend, q, places, channels, keep, stride, *in.buffer,
                  static_cast<std::size_t>(m - keep), M, false, joint);
    } else if (keep > 0) {
        // Held: [held from n on | in's last keep - old_part], gathered in
        // the window and copied back (no copy overlaps its source).
        const std::size_t K = static_cast<std::size_t>(keep);
        auto& window = joint.window.need(backend, at(delays.size(), channels, K));
        std::vector<HeldPlace> rest = places;
        for (HeldPlace& p : rest) p.at += N;
        copy_held(backend, q, rest, channels, old_part, stride, window, 0, K, true, joint);
        if (keep > old_part)
            backend.copy_rows(q, rows, keep - old_part, *in.buffer,
                              static_cast<std::size_t>(m - (keep - old_part)), M, window,
                              static_cast<std::size_t>(old_part), K);
        copy_held(backend, q, places, channels, keep, stride, window, 0, K, false, joint);
    }
    for (StreamDelay* delay : delays) delay->held_ = keep;
    return result;
}

}  // namespace etude::engine
