// gather_slot_rows and scatter_slot_rows (gpu/backend.h; the body in
// gpu/kernels/kernel_bodies.h) on every device the registry opens: each
// item's block goes exactly between its batch place and the slot the
// device's index names, nothing else moves, an index outside the slots
// copies nothing, and a recording of them serves whatever slots the index
// names at each replay (what lets a batch's recording serve any streams
// in those slots: engine/models/batch_major.h). Copies are exact, so every
// comparison is bit for bit.
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend_parity.h"

namespace etude::gpu {
namespace {

class SlotRowsTest : public BackendParity {
  protected:
    // The definition: item b's block between the batch and slot index[b].
    static void copy(const Backend::SlotRows& s, const std::vector<float>& index, bool gather,
                     const std::vector<float>& slots, const std::vector<float>& batch,
                     std::vector<float>& out) {
        for (int b = 0; b < s.items; ++b) {
            const float where = index[std::size_t(b)];
            if (!(where >= 0.0f && where < float(s.slots))) continue;
            const std::size_t slot = std::size_t(where);
            for (int r = 0; r < s.rows; ++r)
                for (int c = 0; c < s.cols; ++c) {
                    const std::size_t in_slot = s.slot_at + slot * s.slot_floats +
                                                std::size_t(r) * s.slot_stride + std::size_t(c);
                    const std::size_t in_batch =
                        s.batch_at + (std::size_t(b) * s.rows + r) * s.batch_stride + c;
                    if (gather)
                        out[in_batch] = slots[in_slot];
                    else
                        out[in_slot] = batch[in_batch];
                }
        }
    }
    static std::size_t slot_floats_needed(const Backend::SlotRows& s) {
        return s.slot_at + (s.slots - 1) * s.slot_floats + (s.rows - 1) * s.slot_stride + s.cols +
               3;
    }
    static std::size_t batch_floats_needed(const Backend::SlotRows& s) {
        return s.batch_at + (std::size_t(s.items) * s.rows - 1) * s.batch_stride + s.cols + 3;
    }
    static std::string name(const char* op, const Backend::SlotRows& s) {
        return std::string(op) + " " + std::to_string(s.items) + " items of " +
               std::to_string(s.rows) + "x" + std::to_string(s.cols) + " in " +
               std::to_string(s.slots) + " slots";
    }
};

// Items in slots out of order, in neighbouring and scattered slots, a
// channel row each or many, and large enough that a launch takes many
// work-groups.
const Backend::SlotRows kShapes[] = {
    {1, 1, 1, 0, 1, 1, 1, 0, 1},
    {3, 4, 5, 2, 40, 9, 6, 1, 7},
    {4, 1, 96, 0, 96, 96, 16, 0, 96},        // one bias row per item (BatchMajor's item biases)
    {5, 192, 6, 3, 1200, 6, 16, 11, 32},     // a decoder layer's held columns into its window
    {16, 64, 33, 0, 64 * 40, 40, 16, 0, 33}  // a full page, a batch of its every slot
};

std::vector<float> index_for(const Backend::SlotRows& s, int turn) {
    std::vector<float> index;
    for (int b = 0; b < s.items; ++b) index.push_back(float((b * 7 + 3 + turn * 5) % s.slots));
    // Distinct indices, as a scatter needs: (7b + c) mod slots differs for
    // every b < slots where 7 and slots share no factor (all shapes here).
    return index;
}

TEST_P(SlotRowsTest, gather_moves_each_items_block_from_its_slot_and_nothing_else) {
    for (const Backend::SlotRows& s : kShapes) {
        const auto slots_v = random_vector(slot_floats_needed(s), 500 + s.cols);
        const auto index_v = index_for(s, 0);
        std::vector<float> want(batch_floats_needed(s), 12345.0f);
        copy(s, index_v, true, slots_v, {}, want);
        const auto slots = upload(slots_v), index = upload(index_v);
        auto batch = output(want.size());
        ref_.gather_slot_rows(*rq_, s, index.ref, slots.ref, batch.ref);
        dev_->gather_slot_rows(*dq_, s, index.dev, slots.dev, batch.dev);
        expect_equal_to(name("gather_slot_rows", s), batch, want, 0.0);
    }
}

TEST_P(SlotRowsTest, scatter_moves_each_items_block_into_its_slot_and_nothing_else) {
    for (const Backend::SlotRows& s : kShapes) {
        const auto batch_v = random_vector(batch_floats_needed(s), 600 + s.cols);
        const auto index_v = index_for(s, 1);
        std::vector<float> want(slot_floats_needed(s), 12345.0f);
        copy(s, index_v, false, {}, batch_v, want);
        const auto batch = upload(batch_v), index = upload(index_v);
        auto slots = output(want.size());
        ref_.scatter_slot_rows(*rq_, s, index.ref, batch.ref, slots.ref);
        dev_->scatter_slot_rows(*dq_, s, index.dev, batch.dev, slots.dev);
        expect_equal_to(name("scatter_slot_rows", s), slots, want, 0.0);
    }
}

// A stale or corrupt index must not write past the slots: items whose
// index is negative, past the last slot or NaN are left alone.
TEST_P(SlotRowsTest, an_index_outside_the_slots_copies_nothing_for_its_item) {
    const Backend::SlotRows s{5, 2, 3, 1, 8, 4, 4, 0, 3};
    const std::vector<float> index_v = {2.0f, -1.0f, 4.0f, std::numeric_limits<float>::quiet_NaN(),
                                        0.0f};
    const auto slots_v = random_vector(slot_floats_needed(s), 700);
    const auto batch_v = random_vector(batch_floats_needed(s), 701);
    std::vector<float> gathered(batch_v.size(), 12345.0f), scattered(slots_v.size(), 12345.0f);
    copy(s, index_v, true, slots_v, {}, gathered);
    copy(s, index_v, false, {}, batch_v, scattered);
    const auto slots = upload(slots_v), batch = upload(batch_v), index = upload(index_v);
    auto into_batch = output(gathered.size()), into_slots = output(scattered.size());
    ref_.gather_slot_rows(*rq_, s, index.ref, slots.ref, into_batch.ref);
    dev_->gather_slot_rows(*dq_, s, index.dev, slots.dev, into_batch.dev);
    ref_.scatter_slot_rows(*rq_, s, index.ref, batch.ref, into_slots.ref);
    dev_->scatter_slot_rows(*dq_, s, index.dev, batch.dev, into_slots.dev);
    expect_equal_to("gather with indices outside the slots", into_batch, gathered, 0.0);
    expect_equal_to("scatter with indices outside the slots", into_slots, scattered, 0.0);
}

// Recorded once, replayed with a new index each time: each replay moves the
// blocks of the slots its index names then (a scale between the gather and
// the scatter shows the data went through the batch).
TEST_P(SlotRowsTest, a_recording_serves_the_slots_its_index_names_at_each_replay) {
    const Backend::SlotRows s{3, 4, 5, 0, 20, 5, 8, 0, 5};
    auto state = random_vector(slot_floats_needed(s), 800);
    auto slots = dev_->allocate(state.size(), "test slots");
    auto batch = dev_->allocate(batch_floats_needed(s), "test batch");
    auto index = dev_->allocate(std::size_t(s.items), "test index");
    dev_->copy_to_device(*dq_, slots, 0, state.data(), state.size());
    // (The copy reads `state` until the queue is synchronized, and the
    // definition below rewrites it: on PoCL a later read doubled twice.)
    dev_->synchronize(*dq_);
    const auto step = [&](Queue& q) {
        dev_->gather_slot_rows(q, s, index, slots, batch);
        dev_->axpby(q, batch.floats(), 2.0f, batch, 0.0f, batch);
        dev_->scatter_slot_rows(q, s, index, batch, slots);
    };
    const Recording recording = dev_->record(*dq_, step);
    for (int turn = 0; turn < 4; ++turn) {
        const auto index_v = index_for(s, turn);
        dev_->copy_to_device(*dq_, index, 0, index_v.data(), index_v.size());
        dev_->replay(*dq_, recording);
        // The definition: the named slots' blocks doubled.
        std::vector<float> through(batch.floats(), 0.0f);
        copy(s, index_v, true, state, {}, through);
        for (float& v : through) v *= 2.0f;
        copy(s, index_v, false, {}, through, state);
        std::vector<float> got(state.size());
        dev_->copy_to_host(*dq_, got.data(), slots, 0, got.size());
        dev_->synchronize(*dq_);
        EXPECT_EQ(got, state) << label() << ", replay " << turn;
    }
}

TEST_P(SlotRowsTest, bad_slot_arguments_are_refused_before_anything_runs) {
    auto a = upload(random_vector(64, 900));
    auto b = output(64);
    const auto index = upload({0.0f, 1.0f});
    const auto refused = [&](const Backend::SlotRows& s, const DeviceBuffer& i,
                             const DeviceBuffer& slots, DeviceBuffer& batch, const char* why) {
        EXPECT_THROW(dev_->gather_slot_rows(*dq_, s, i, slots, batch), std::invalid_argument)
            << why;
    };
    refused({2, 2, 4, 0, 8, 4, 9, 0, 4}, index.dev, a.dev, b.dev, "slots reach past 64 floats");
    refused({2, 2, 4, 0, 8, 4, 2, 0, 40}, index.dev, a.dev, b.dev, "batch reaches past 64 floats");
    refused({3, 1, 4, 0, 4, 4, 2, 0, 4}, index.dev, a.dev, b.dev, "3 items, 2 indices");
    refused({2, 2, 4, 0, 8, 3, 2, 0, 4}, index.dev, a.dev, b.dev, "a slot's rows overlap");
    refused({2, 1, 4, 0, 4, 4, 2, 0, 3}, index.dev, a.dev, b.dev, "the items' rows overlap");
    refused({2, 1, 4, SIZE_MAX - 2, 4, 4, 2, 0, 4}, index.dev, a.dev, b.dev,
            "an offset whose block's end would wrap around to 6");
    refused({2, 2, 4, 0, 6, 4, 2, 0, 4}, index.dev, a.dev, b.dev, "slots overlap");
    refused({2, 1, 4, 0, 4, 4, 0, 0, 4}, index.dev, a.dev, b.dev, "no slots");
    refused({2, 1, 4, 0, 4, 4, 2, 0, 4}, index.dev, a.dev, a.dev, "slots are the batch");
    refused({2, 1, 4, 0, 4, 4, 2, 0, 4}, a.dev, a.dev, b.dev, "the index is the slots");
    dev_->synchronize(*dq_);
    expect_equal_to("batch after refused calls", b, std::vector<float>(64, 12345.0f), 0.0);
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, SlotRowsTest, ::testing::ValuesIn(targets()), target_name);

}  // namespace
}  // namespace etude::gpu
