#include "engine/models/vits/text_analysis_network.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace etude::engine {

VitsAnalysisNetwork::VitsAnalysisNetwork(const VitsWeights& weights,
                                         std::shared_ptr<gpu::Backend> backend)
    : encoder_(weights, backend), durations_(weights, backend), join_(backend->info().is_gpu) {}

void VitsAnalysisNetwork::run(std::span<const VitsAnalysisPush> batch) const {
    if (batch.size() == 1) {
        const VitsAnalysisPush& p = batch.front();
        *p.encoding = encoder_.encode(p.ids);
        *p.log_durations = durations_.log_durations(*p.encoding, p.noise, p.speaker);
        *p.batch = 1;
        return;
    }
    std::vector<std::span<const std::int64_t>> sentences;
    for (const auto& p : batch) sentences.push_back(p.ids);
    std::vector<VitsEncoding> encodings = encoder_.encode(sentences);
    std::vector<VitsDurationNetwork::Sentence> inputs;
    for (std::size_t i = 0; i < batch.size(); ++i)
        inputs.push_back({&encodings[i], batch[i].noise, batch[i].speaker});
    std::vector<std::vector<double>> logw = durations_.log_durations(inputs);
    for (std::size_t i = 0; i < batch.size(); ++i) {
        *batch[i].encoding = std::move(encodings[i]);
        *batch[i].log_durations = std::move(logw[i]);
        *batch[i].batch = batch.size();
    }
}

VitsAnalysisNetwork::Result VitsAnalysisNetwork::prior(const VitsTextToLatent& host,
                                                       std::span<const std::int64_t> ids,
                                                       int speaker, const VitsScales& scales,
                                                       std::mt19937_64& noise,
                                                       Batching batching) const {
    // Checked here, each on its own thread: a bad argument in a batch would
    // fail every sentence of it.
    host.check_arguments(ids, speaker, scales);
    // The predictor's noise, drawn as the host's prior() would draw it, on
    // a copy: the caller's generator is left as it was unless the prior is
    // made here.
    std::mt19937_64 drawn = noise;
    const std::vector<double> dp_noise =
        VitsTextToLatent::duration_noise(int(ids.size()), scales, drawn);
    Result r;
    VitsEncoding encoding;
    std::vector<double> logw;
    const VitsAnalysisPush me{ids, speaker, dp_noise, &encoding, &logw, &r.batch};
    try {
        if (PushJoiner<VitsAnalysisPush>* joiner = this->joiner(batching)) {
            // (Run on the lane's thread by the batch's first sentence: this
            // one's, when it is first.) An error reaches every sentence of
            // the batch as a device error of the same kind (so that the
            // joiner halves its batches after an out-of-memory), naming the
            // batch: each stream's host then makes its sentence.
            joiner->push(me, [this](std::span<const VitsAnalysisPush> batch) {
                run_naming_the_batch(batch.size(), "", "sentences", [&] { run(batch); });
            });
        } else {
            run({&me, 1});
        }
    } catch (const gpu::DeviceError& e) {
        r.outcome = Outcome::DeviceError;
        r.error = e.what();
        return r;
    }
    if (VitsTextToLatent::near_a_duration_tie(logw, scales.length_scale)) {
        r.outcome = Outcome::NearTie;
        return r;
    }
    // The host's prior from the device's output draws the same noise again
    // (the device was handed it), rounds the durations and seeds the
    // prior's generator: so `noise` moves exactly as a host prior moves it.
    const VitsLogDurations made = [&](const VitsEncoding&, std::span<const double> z) {
        if (!std::equal(z.begin(), z.end(), dp_noise.begin(), dp_noise.end()))
            throw std::logic_error("VITS analysis: the host drew other duration noise");
        return logw;
    };
    std::mt19937_64 again = noise;
    r.prior = host.prior(encoding, speaker, scales, again, made);
    noise = again;
    return r;
}

}  // namespace etude::engine
