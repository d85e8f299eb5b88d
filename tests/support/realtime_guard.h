// Proves the real-time rules on a thread: while a RealtimeScope is alive on
// a thread, every allocation, free, mutex lock, condition wait, sleep or
// blocking I/O call made by that thread is counted as a violation.
//
// How: this test-support library interposes malloc/free/calloc/realloc/
// memalign family, pthread_mutex_lock, pthread_cond_(timed)wait, nanosleep,
// usleep, read, write, poll and sem_wait for the whole test binary; each
// forwards to the C library and, if the calling thread is marked, records the
// call. Unmarked threads pay one thread-local load per call.
#pragma once

#include <cstdint>
#include <string>

namespace etude::test {

struct RealtimeViolations {
    std::uint64_t allocations = 0;
    std::uint64_t frees = 0;
    std::uint64_t locks = 0;
    std::uint64_t blocking_calls = 0;
    std::string first;  // name of the first offending call
    std::uint64_t total() const { return allocations + frees + locks + blocking_calls; }
};

// Marks the current thread as real-time for its lifetime.
class RealtimeScope {
  public:
    RealtimeScope();
    ~RealtimeScope();
    RealtimeScope(const RealtimeScope&) = delete;
    RealtimeScope& operator=(const RealtimeScope&) = delete;
};

// Marks another thread (e.g. JACK's process thread, which the test does not
// create) as real-time until unmark_thread(). One such thread at a time.
void mark_thread(unsigned long pthread_id);
void unmark_thread();

// Violations recorded so far (all threads) and a reset.
RealtimeViolations realtime_violations();
void reset_realtime_violations();

}  // namespace etude::test
