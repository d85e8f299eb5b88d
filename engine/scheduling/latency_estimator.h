// Online estimate of how long a kind of work takes: a high percentile of the
// recent durations (the last 64, within a horizon of 200 blocks) plus a
// safety margin. A mean would hide exactly the
// slow outliers that make blocks late.
//
// Threads: one owner thread (the block scheduler); no allocation after
// construction (a fixed window).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace etude::engine {

class LatencyEstimator {
  public:
    static constexpr std::size_t kWindow = 64;

    // percentile in (0, 1]; margin is added as a fraction and a floor in ns.
    explicit LatencyEstimator(double percentile = 0.95, double margin_fraction = 0.25,
                              std::int64_t margin_floor_ns = 200'000,
                              std::int64_t prior_ns = 2'000'000)
        : percentile_(percentile),
          margin_fraction_(margin_fraction),
          margin_floor_ns_(margin_floor_ns),
          prior_ns_(prior_ns) {}

    // `stamp` orders measurements in time (the scheduler uses block
    // indices); only those within the horizon of the latest query count, so
    // an old outlier ages out even if the processor is not used meanwhile.
    void add(std::int64_t duration_ns, std::uint64_t stamp) {
        window_[next_ % kWindow] = duration_ns;
        stamps_[next_ % kWindow] = stamp;
        ++next_;
    }
    void set_now(std::uint64_t stamp) { now_ = stamp; }
    static constexpr std::uint64_t kHorizon = 200;

    std::size_t samples() const { return std::min<std::size_t>(next_, kWindow); }

    // The percentile of the window; `prior` until anything was measured.
    std::int64_t percentile_ns() const { return quantile_ns(percentile_); }

    std::int64_t quantile_ns(double q) const {
        std::array<std::int64_t, kWindow> sorted;
        std::size_t n = 0;
        for (std::size_t i = 0; i < samples(); ++i)
            if (stamps_[i] + kHorizon >= now_) sorted[n++] = window_[i];
        if (n == 0) return prior_ns_;
        const auto k = std::min(n - 1, static_cast<std::size_t>(q * static_cast<double>(n)));
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(k),
                         sorted.begin() + static_cast<long>(n));
        return sorted[k];
    }

    // What the scheduler plans with: percentile plus margin.
    std::int64_t estimate_ns() const { return with_margin(percentile_ns()); }

    std::int64_t with_margin(std::int64_t p) const {
        return p + std::max(margin_floor_ns_,
                            static_cast<std::int64_t>(static_cast<double>(p) * margin_fraction_));
    }

  private:
    double percentile_, margin_fraction_;
    std::int64_t margin_floor_ns_, prior_ns_;
    std::array<std::int64_t, kWindow> window_{};
    std::array<std::uint64_t, kWindow> stamps_{};
    std::size_t next_ = 0;
    std::uint64_t now_ = 0;
};

}  // namespace etude::engine
