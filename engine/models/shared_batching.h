// Where the streams of a network meet in batches, and the parts of their
// state that batches read: its lanes (stream_joiner.h), the lender of the
// streams' chunk-sized buffers (scratch_lender.h), the slots of their held
// samples (batch_major.h), the budget of their lone recordings and each
// lane's recordings of batches in one state (recorded_step.h).
//
// One for every network that shares one set of weights: the speakers of a
// Piper voice, whose decoders and flows differ only in the biases their
// conditioning folds into (HifiGanNetwork's and VitsFlowNetwork's sharing
// constructors). Their streams then go in one batch, BatchMajor adding
// each item's own bias where the layers' differ, and a voice of many
// speakers under many streams makes batches as large as one of a single
// speaker would. A batch of several speakers reads each item's bias from a
// copy its stream keeps in its slot (WeightedStreamLayer::hold_bias), so
// its recording serves whichever speakers hold those slots; a batch of one
// network's streams has that network's bias in its recording, and its key
// names the network (`next_network_id()`, never given twice): a recording
// of a network gone is never replayed again, only let go in its turn.
//
// Made by the network that owns the weights and held by each one sharing
// them; the recordings name the owner's weights, which outlive every
// network sharing them (a sharing flow holds its owner; a sharing decoder's
// NeuralModel holds the owner's, NeuralModel::sharing_weights).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "engine/models/batch_major.h"
#include "engine/models/recorded_step.h"
#include "engine/models/scratch_lender.h"
#include "engine/models/stream_joiner.h"
#include "gpu/backend.h"

namespace etude::engine {

template <class Push>
struct SharedBatching {
    explicit SharedBatching(gpu::Backend& backend)
        : lanes(&backend),
          lender(ScratchLender::bound_for(backend)),
          held_slots(backend),
          lone_recordings(backend.info().global_memory / 8),
          live(backend, lanes.of(Batching::Join).joint),
          offline(backend, lanes.of(Batching::JoinOffline).joint) {}
    SharedBatching(const SharedBatching&) = delete;
    SharedBatching& operator=(const SharedBatching&) = delete;

    // The batches of live streams and of offline readers.
    JoinLanes<Push> lanes;
    // Every stream's chunk-sized buffers, lent for its pushes.
    ScratchLender lender;
    // Every joining stream's held samples, side by side.
    HeldSlots held_slots;
    // What the streams' lone recordings may hold together: an eighth of
    // the device's memory.
    RecordingBudget lone_recordings;
    // Each lane's recordings of batches side by side. Declared
    // last: they name the lanes' joint buffers and the held slots.
    RecordedBatches live, offline;

    RecordedBatches& of(JoinLane<Push>& lane) {
        return &lane == &lanes.of(Batching::JoinOffline) ? offline : live;
    }
    // Batch replays over both lanes (each read under its lock).
    ReplayStats replay_stats() {
        ReplayStats total;
        for (Batching kind : {Batching::Join, Batching::JoinOffline}) {
            JoinLane<Push>& lane = lanes.of(kind);
            std::lock_guard lock(lane.mu);
            total += of(lane).steps().stats();
        }
        return total;
    }
};

// A network's name in batch recordings' keys: never given twice in a
// process, unlike an address.
inline std::uint64_t next_network_id() {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

// The last entry of a batch's recording key: whose biases it adds
// (the lane is its voice's every speaker's). Where the members' differ
// (`several_speakers`), each one's from its slot (BatchMajor), so any
// speakers in those slots replay it: -1. Else the one network's bias is in
// the recording, and the network (`network_id`) is named.
inline long biases_in_key(bool several_speakers, std::uint64_t network_id) {
    return several_speakers ? -1 : static_cast<long>(network_id);
}

}  // namespace etude::engine
