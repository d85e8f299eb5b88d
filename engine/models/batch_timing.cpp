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

}  // namespace

JoinedTiming time_joined_chunks(const NeuralModel& decoder, int units, int chunk_frames, int rounds,
                                std::int64_t longest_round_ns) {
    if (units < 1 || chunk_frames < 1 || rounds < 1)
        throw std::invalid_argument("time_joined_chunks: units, chunk_frames and rounds >= 1");
    constexpr int kWarmRounds = 2;
    const auto count = static_cast<std::size_t>(units);
    std::vector<std::unique_ptr<NetworkStream>> streams(count);
    for (auto& s : streams) {
        s = decoder.open_stream();
        if (!s) throw std::invalid_argument(decoder.label() + " does not run incrementally");
    }
    const std::vector<float> latent = quiet_latent(decoder.audio().n_mels, chunk_frames);
    std::vector<std::vector<float>> values(count);
    std::vector<StreamPush> pushes(count);
    JoinedTiming timing{std::numeric_limits<std::int64_t>::max(), false};
    for (int round = 0; round < kWarmRounds + rounds; ++round) {
        for (std::size_t i = 0; i < count; ++i) {
            values[i].clear();
            pushes[i] = {streams[i].get(), latent.data(), chunk_frames, false, &values[i]};
        }
        const auto t0 = Clock::now();
        pushes[0].stream->push_together(pushes);
        const std::int64_t ns = ns_since(t0);
        if (ns > longest_round_ns) return {ns, true};
        if (round >= kWarmRounds) timing.ns = std::min(timing.ns, ns);
    }
    return timing;
}

double time_flow_frame(std::shared_ptr<const VitsFlowNetwork> flow, int rounds) {
    if (rounds < 1) throw std::invalid_argument("time_flow_frame: rounds >= 1");
    const int channels = flow->channels();
    VitsFlowStream stream(std::move(flow));
    const int frames = VitsFlowStream::kMinPush * (rounds + 3);
    const std::vector<float> prior = quiet_latent(channels, frames);
    std::vector<float> z = prior;
    int made = stream.run_until(prior, frames, 1, z);
    double quickest = std::numeric_limits<double>::max();
    for (int round = 0; round < rounds && made < frames; ++round) {
        const auto t0 = Clock::now();
        const int now_made = stream.run_until(prior, frames, made + 1, z);
        const auto ns = static_cast<double>(ns_since(t0));
        if (now_made > made) quickest = std::min(quickest, ns / (now_made - made));
        made = now_made;
    }
    if (quickest == std::numeric_limits<double>::max())
        throw std::logic_error("time_flow_frame: the flow made no frames");
    return quickest;
}

}  // namespace etude::engine
