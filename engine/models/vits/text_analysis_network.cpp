#include "engine/models/vits/text_analysis_network.h"

#include <utility>
#include <vector>

namespace etude::engine {
namespace {

// Thrown through the host's prior() from the log durations' callback: the
// device's durations lie near a tie, and the host's work on them after it
// (rounding, the prior's generator) would be thrown away.
struct DurationsNearATie {};

}  // namespace

VitsAnalysisNetwork::VitsAnalysisNetwork(const VitsWeights& weights,
                                         std::shared_ptr<gpu::Backend> backend)
    : encoder_(weights, backend), durations_(weights, std::move(backend)) {}

VitsAnalysisNetwork::Result VitsAnalysisNetwork::prior(const VitsTextToLatent& host,
                                                       std::span<const std::int64_t> ids,
                                                       int speaker, const VitsScales& scales,
                                                       std::mt19937_64& noise) const {
    check_phoneme_ids(host.hp(), ids);
    Result r;
    // The host's draws on a copy: given back only with the device's prior.
    std::mt19937_64 drawn = noise;
    try {
        const VitsEncoding encoding = encoder_.encode(ids);
        const VitsLogDurations on_device = [&](const VitsEncoding& e, std::span<const double> z) {
            std::vector<double> logw = durations_.log_durations(e, z, speaker);
            if (VitsTextToLatent::near_a_duration_tie(logw, scales.length_scale))
                throw DurationsNearATie{};
            return logw;
        };
        r.prior = host.prior(encoding, speaker, scales, drawn, on_device);
        noise = drawn;
    } catch (const DurationsNearATie&) {
        r.outcome = Outcome::NearTie;
    } catch (const gpu::DeviceError& e) {
        r.outcome = Outcome::DeviceError;
        r.error = e.what();
    }
    return r;
}

}  // namespace etude::engine
