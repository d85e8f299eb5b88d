#include "engine/models/stream_joiner.h"

#include <algorithm>
#include <utility>

#include "gpu/backend.h"

namespace etude::engine {

void StreamJoiner::push(const StreamPush& push, const RunBatch& run) {
    Waiter me{push};
    std::unique_lock lock(mu_);
    waiting_.push_back(&me);
    while (!me.done) {
        if (running_ || paused_) {
            cv_.wait(lock);
            continue;
        }
        // No batch runs: this thread runs one for the pushes waiting, the
        // first that came up to the cap (its own may be left for the next).
        running_ = true;
        const std::size_t take =
            stats_.cap ? std::min<std::size_t>(waiting_.size(), stats_.cap) : waiting_.size();
        std::vector<Waiter*> batch(waiting_.begin(),
                                   waiting_.begin() + static_cast<std::ptrdiff_t>(take));
        waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
        lock.unlock();
        std::exception_ptr error;
        bool out_of_memory = false;
        try {
            // (Inside the try: a push that failed here but left running_ set
            // would hang every push of the batch.)
            std::vector<StreamPush> pushes;
            pushes.reserve(batch.size());
            for (const Waiter* w : batch) pushes.push_back(w->push);
            run(pushes);
        } catch (const gpu::OutOfMemory&) {
            error = std::current_exception();
            out_of_memory = true;
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (out_of_memory) {
            // Its pushes are remade elsewhere (the error reaches each); the
            // batches after it take half as many, down to one.
            ++stats_.out_of_memory;
            stats_.cap = std::max<std::uint64_t>(1, batch.size() / 2);
        }
        for (Waiter* w : batch) {
            w->done = true;
            w->error = error;
        }
        ++stats_.batches;
        stats_.pushes += batch.size();
        stats_.largest = std::max<std::uint64_t>(stats_.largest, batch.size());
        running_ = false;
        // The pushes of this batch return; of those that came meanwhile, the
        // first to wake runs the next batch.
        cv_.notify_all();
    }
    if (me.error) std::rethrow_exception(me.error);
}

JoinStats StreamJoiner::stats() const {
    std::lock_guard lock(mu_);
    return stats_;
}

void StreamJoiner::pause() {
    std::lock_guard lock(mu_);
    paused_ = true;
}

void StreamJoiner::resume() {
    {
        std::lock_guard lock(mu_);
        paused_ = false;
    }
    cv_.notify_all();
}

std::size_t StreamJoiner::waiting() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
}

}  // namespace etude::engine
