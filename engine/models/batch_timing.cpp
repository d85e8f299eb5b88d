#include "engine/models/batch_timing.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <vector>

#include "engine/models/vits/flow_stream.h"

namespace etude::engine {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t ns_since(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// A latent of small values: the work does not depend on them, and silence
// keeps every activation finite.
std::vector<float> quiet_latent(int channels, int frames) {
    std::vector<float> x(static_cast<std::size_t>(channels) * static_cast<std::size_t>(frames));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
    return x;
}

// Rounds before those timed: a stream's first pushes fill its held frames
// and size its buffers, and do not line up with a settled stream's.
constexpr int kWarmRounds = 2;

// `round` run kWarmRounds + `rounds` times: the quickest timed round, or the
// first round longer than `longest_round_ns`, cut_short.
template <class Round>
JoinedTiming quickest_round(int rounds, std::int64_t longest_round_ns, const Round& round) {
    JoinedTiming timing{std::numeric_limits<std::int64_t>::max(), false};
    for (int r = 0; r < kWarmRounds + rounds; ++r) {
        const auto t0 = Clock::now();
        round();
        const std::int64_t ns = ns_since(t0);
        if (ns > longest_round_ns) return {ns, true};
        if (r >= kWarmRounds) timing.ns = std::min(timing.ns, ns);
    }
    return timing;
}

}  // namespace

JoinedTiming time_joined_chunks(const NeuralModel& decoder, int units, int chunk_frames, int rounds,
                                std::int64_t longest_round_ns) {
    if (units < 1 || chunk_frames < 1 || rounds < 1)
        throw std::invalid_argument("time_joined_chunks: units, chunk_frames and rounds >= 1");
    const auto count = static_cast<std::size_t>(units);
    std::vector<std::unique_ptr<NetworkStream>> streams(count);
    for (auto& s : streams) {
        s = decoder.open_stream();
        if (!s) throw std::invalid_argument(decoder.label() + " does not run incrementally");
    }
    const std::vector<float> latent = quiet_latent(decoder.audio().n_mels, chunk_frames);
    std::vector<std::vector<float>> values(count);
    std::vector<StreamPush> pushes(count);
    return quickest_round(rounds, longest_round_ns, [&] {
        for (std::size_t i = 0; i < count; ++i) {
            values[i].clear();
            pushes[i] = {streams[i].get(), latent.data(), chunk_frames, false, &values[i]};
        }
        pushes[0].stream->push_together(pushes);
    });
}

JoinedTiming time_joined_flow(std::shared_ptr<const VitsFlowNetwork> flow, int units,
                              int push_frames, int rounds, std::int64_t longest_round_ns) {
    if (units < 1 || push_frames < 1 || rounds < 1)
        throw std::invalid_argument("time_joined_flow: units, push_frames and rounds >= 1");
    const std::vector<float> block = quiet_latent(flow->channels(), push_frames);
    std::vector<std::unique_ptr<VitsFlowStream>> owned;
    std::vector<VitsFlowStream*> streams;
    for (int i = 0; i < units; ++i) {
        owned.push_back(std::make_unique<VitsFlowStream>(flow));
        streams.push_back(owned.back().get());
    }
    return quickest_round(rounds, longest_round_ns, [&] {
        VitsFlowStream::push_block_together(streams, block, push_frames);
    });
}

}  // namespace etude::engine
