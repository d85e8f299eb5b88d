#include "engine/scheduling/device_health.h"

#include <algorithm>

namespace etude::engine {

void DeviceHealthBreaker::record_failure(std::int64_t now_ns, const std::string& what) {
    std::lock_guard lock(mu_);
    ++consecutive_;
    ++total_;
    last_error_ = what;
    std::int64_t backoff = consecutive_ == 1 ? 0 : kFirstBackoffNs;
    for (int i = 2; i < consecutive_ && backoff < kMaxBackoffNs; ++i) backoff *= 2;
    retry_at_ns_ = now_ns + std::min(backoff, kMaxBackoffNs);
}

void DeviceHealthBreaker::record_success() {
    std::lock_guard lock(mu_);
    if (consecutive_ < kMaxConsecutiveFailures) consecutive_ = 0;
}

bool DeviceHealthBreaker::disabled() const {
    std::lock_guard lock(mu_);
    return consecutive_ >= kMaxConsecutiveFailures;
}

bool DeviceHealthBreaker::may_try(std::int64_t now_ns) const {
    std::lock_guard lock(mu_);
    return consecutive_ < kMaxConsecutiveFailures && now_ns >= retry_at_ns_;
}

std::int64_t DeviceHealthBreaker::retry_at_ns() const {
    std::lock_guard lock(mu_);
    return retry_at_ns_;
}

std::uint64_t DeviceHealthBreaker::failures() const {
    std::lock_guard lock(mu_);
    return total_;
}

std::string DeviceHealthBreaker::last_error() const {
    std::lock_guard lock(mu_);
    return last_error_;
}

}  // namespace etude::engine
