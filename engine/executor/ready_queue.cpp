#include "engine/executor/ready_queue.h"

#include <algorithm>

namespace etude::engine::executor {

std::vector<WorkUnit> ReadyQueue::take_batch(std::int64_t now_ns, const BatchRule& rule,
                                             const BatchCost& cost) {
    std::vector<WorkUnit> batch;
    if (units_.empty()) return batch;
    // A scan, not a heap: a unit's class changes with the clock (it turns
    // urgent), so no key fixed at push orders it, and the batch needs a
    // pass over the units of one network anyway.
    auto first = units_.begin();
    for (auto it = units_.begin(); it != units_.end(); ++it)
        if (it->due.before(first->due, now_ns)) first = it;
    const WorkUnit head = *first;
    units_.erase(first);
    batch.push_back(head);

    // Units of the head's network due within the window, in the order.
    std::vector<std::size_t> joinable;
    for (std::size_t i = 0; i < units_.size(); ++i)
        if (units_[i].network == head.network &&
            units_[i].due.deadline_ns <= head.due.deadline_ns + rule.window_ns)
            joinable.push_back(i);
    std::sort(joinable.begin(), joinable.end(), [&](std::size_t a, std::size_t b) {
        return units_[a].due.before(units_[b].due, now_ns);
    });

    std::int64_t frames = head.frames;
    std::vector<std::size_t> taken;
    for (std::size_t i : joinable) {
        if (static_cast<int>(batch.size()) >= rule.max_units) break;
        const std::int64_t grown = frames + units_[i].frames;
        if (now_ns + cost.of(grown) > head.due.deadline_ns) break;
        frames = grown;
        batch.push_back(units_[i]);
        taken.push_back(i);
    }
    // Erase from the back so the indices stay valid.
    std::sort(taken.begin(), taken.end());
    for (auto it = taken.rbegin(); it != taken.rend(); ++it)
        units_.erase(units_.begin() + static_cast<std::ptrdiff_t>(*it));
    return batch;
}

std::size_t ReadyQueue::remove_stream(std::uint64_t stream) {
    return std::erase_if(units_, [&](const WorkUnit& u) { return u.stream == stream; });
}

std::int64_t ReadyQueue::wait_before_ns(const WorkDue& due, std::int64_t now_ns,
                                        const BatchRule& rule, const BatchCost& cost) const {
    std::int64_t frames = 0, units = 0;
    for (const auto& u : units_)
        if (!due.before(u.due, now_ns)) {
            frames += u.frames;
            ++units;
        }
    if (units == 0) return 0;
    const std::int64_t batches = (units + rule.max_units - 1) / rule.max_units;
    return batches * cost.launch_ns + (cost.of(frames) - cost.launch_ns);
}

}  // namespace etude::engine::executor
