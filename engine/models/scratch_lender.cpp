#include "engine/models/scratch_lender.h"

#include <algorithm>

namespace etude::engine {

std::size_t ScratchLender::bound_for(const gpu::Backend& backend) {
    const auto& info = backend.info();
    if (info.is_gpu) return 0;
    return static_cast<std::size_t>(std::max(info.compute_units, 1));
}

ScratchLender::Loan::Loan(ScratchLender& lender,
                          std::span<const std::span<ScratchBuffer* const>> groups)
    : lender_(lender), groups_(groups) {
    const std::size_t want = groups.size();
    std::unique_lock lock(lender.mu_);
    const std::uint64_t ticket = lender.next_ticket_++;
    lender.cv_.wait(lock, [&] {
        return ticket == lender.serving_ &&
               (lender.max_out_ == 0 || lender.out_ == 0 || lender.out_ + want <= lender.max_out_);
    });
    ++lender.serving_;
    lender.out_ += want;
    for (const auto& group : groups) {
        Set set;
        if (!lender.free_.empty()) {
            set = std::move(lender.free_.back());
            lender.free_.pop_back();
        } else {
            ++lender.made_;
        }
        set.resize(std::max(set.size(), group.size()));
        for (std::size_t i = 0; i < group.size(); ++i) group[i]->swap(set[i]);
    }
    lock.unlock();
    // The next loan in line may fit beside this one.
    lender.cv_.notify_all();
}

ScratchLender::Loan::~Loan() {
    {
        std::lock_guard lock(lender_.mu_);
        for (const auto& group : groups_) {
            Set set(group.size());
            for (std::size_t i = 0; i < group.size(); ++i) group[i]->swap(set[i]);
            lender_.free_.push_back(std::move(set));
        }
        lender_.out_ -= groups_.size();
    }
    lender_.cv_.notify_all();
}

ScratchLender::User::User(ScratchLender& lender) : lender_(lender) {
    std::lock_guard lock(lender.mu_);
    ++lender.users_;
}

ScratchLender::User::~User() {
    std::vector<Set> freed;  // destroyed outside the lock
    std::lock_guard lock(lender_.mu_);
    if (--lender_.users_ == 0) freed.swap(lender_.free_);
}

std::size_t ScratchLender::sets_made() const {
    std::lock_guard lock(mu_);
    return made_;
}

std::size_t ScratchLender::sets_held() const {
    std::lock_guard lock(mu_);
    return free_.size() + out_;
}

}  // namespace etude::engine
