#include "engine/executor/executor.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace etude::engine::executor {

Executor::Executor(std::vector<ProcessorSpec> processors) {
    for (auto& spec : processors) {
        ProcessorState state{std::move(spec), {}, {}, false};
        state.busy_until_ns.assign(static_cast<std::size_t>(std::max(1, state.spec.workers)), -1);
        processors_.push_back(std::move(state));
    }
}

// From now until the unit would be done here: until a worker is free, the
// units ahead of it (spread over the workers) and its own batch's launch.
std::int64_t Executor::estimate_ns(const ProcessorState& p, const WorkUnit& unit,
                                   std::int64_t now_ns) const {
    std::int64_t free_in = INT64_MAX;
    for (std::int64_t until : p.busy_until_ns)
        free_in = std::min(free_in, until < 0 ? 0 : std::max<std::int64_t>(0, until - now_ns));
    const auto workers = static_cast<std::int64_t>(p.busy_until_ns.size());
    const std::int64_t ahead =
        p.queue.wait_before_ns(unit.due, now_ns, p.spec.rule, p.spec.cost) / workers;
    return free_in + ahead + p.spec.cost.of(unit.frames);
}

int Executor::submit(const WorkUnit& unit, std::int64_t now_ns) {
    std::vector<Candidate> candidates;
    for (const auto& p : processors_)
        candidates.push_back({p.spec.kind, Quality::Full, estimate_ns(p, unit, now_ns), !p.lost});
    const int chosen = choose_candidate(candidates, now_ns, unit.due.deadline_ns);
    if (chosen >= 0) at(chosen).queue.push(unit);
    return chosen;
}

std::vector<Executor::Launch> Executor::start_ready(std::int64_t now_ns) {
    std::vector<Launch> launches;
    for (int i = 0; i < static_cast<int>(processors_.size()); ++i) {
        auto& p = at(i);
        if (p.lost) continue;
        for (int w = 0; w < static_cast<int>(p.busy_until_ns.size()) && !p.queue.empty(); ++w) {
            auto& until = p.busy_until_ns[static_cast<std::size_t>(w)];
            if (until >= 0) continue;
            Launch launch{i, w, p.queue.take_batch(now_ns, p.spec.rule, p.spec.cost), 0};
            std::int64_t frames = 0;
            for (const auto& u : launch.units) frames += u.frames;
            launch.expected_ns = p.spec.cost.of(frames);
            until = now_ns + launch.expected_ns;
            launches.push_back(std::move(launch));
        }
    }
    return launches;
}

void Executor::finished(int processor, int worker) {
    at(processor).busy_until_ns[static_cast<std::size_t>(worker)] = -1;
}

void Executor::lose(int processor, std::span<const WorkUnit> running, std::int64_t now_ns) {
    auto& p = at(processor);
    p.lost = true;
    std::fill(p.busy_until_ns.begin(), p.busy_until_ns.end(), -1);
    std::vector<WorkUnit> orphans(running.begin(), running.end());
    while (!p.queue.empty()) {
        auto batch = p.queue.take_batch(now_ns, {1, 0}, p.spec.cost);
        orphans.insert(orphans.end(), batch.begin(), batch.end());
    }
    // Earliest first, so the most urgent get the quickest of the rest.
    std::sort(orphans.begin(), orphans.end(),
              [&](const WorkUnit& a, const WorkUnit& b) { return a.due.before(b.due, now_ns); });
    for (const auto& u : orphans) submit(u, now_ns);
}

void Executor::out_of_memory(int processor, int worker, std::span<const WorkUnit> units) {
    auto& p = at(processor);
    p.busy_until_ns[static_cast<std::size_t>(worker)] = -1;
    p.spec.rule.max_units = std::max(1, static_cast<int>(units.size()) / 2);
    for (const auto& u : units) p.queue.push(u);
}

std::size_t Executor::cancel(std::uint64_t stream) {
    std::size_t n = 0;
    for (auto& p : processors_) n += p.queue.remove_stream(stream);
    return n;
}

}  // namespace etude::engine::executor
