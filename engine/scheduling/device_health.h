// The scheduling policy's device-health breaker, one for every kind of
// stream: the GPU processor of a text stream (BlockProcessor) and the GPU
// tier of a mel stream (MelScheduler) both report each device error and
// each success here, and ask it whether the device may be tried.
//
// The rule: after a device error its owner rebuilds the device state and
// the device may be tried again at once; after a second error in a row it
// is out for a backoff (2 ms, doubling with each further error in a row, at
// most 1 s); kMaxConsecutiveFailures errors in a row turn it off for good;
// a success resets the run and the backoff. (The first retry is immediate
// because one error is the common transient case: a mel stream's next
// chunk, made tens of microseconds later, goes back to the GPU.)
//
// Why consecutive rather than total: a long-lived stream (a server, a
// voice assistant) meets transient errors now and then (an out-of-memory
// while another process holds the device, one watchdog-killed launch); a
// total count would turn a healthy device off after three such events
// spread over hours. A broken device fails every retry, so it is still off
// after three errors. Every error is covered by the CPU either way, so a
// retry costs a fallback, never a dropout; the backoff keeps a device that
// fails intermittently from taking a fallback on every block.
//
// Threads: any; one mutex, never on the audio callback's path. Times come
// from the caller (rt::now_ns() in the engine, a fake clock in tests).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

namespace etude::engine {

class DeviceHealthBreaker {
  public:
    static constexpr int kMaxConsecutiveFailures = 3;
    static constexpr std::int64_t kFirstBackoffNs = 2'000'000;
    static constexpr std::int64_t kMaxBackoffNs = 1'000'000'000;

    // A device error at `now_ns`.
    void record_failure(std::int64_t now_ns, const std::string& what);
    // A piece of work the device completed.
    void record_success();
    // Off for good (kMaxConsecutiveFailures errors in a row).
    bool disabled() const;
    // Not disabled and not inside a backoff.
    bool may_try(std::int64_t now_ns) const;
    // When the backoff after the last error ends (the time of the error,
    // for the first in a run).
    std::int64_t retry_at_ns() const;
    std::uint64_t failures() const;  // all errors, for the statistics
    std::string last_error() const;

  private:
    mutable std::mutex mu_;
    int consecutive_ = 0;
    std::uint64_t total_ = 0;
    std::int64_t retry_at_ns_ = 0;
    std::string last_error_;
};

}  // namespace etude::engine
