#include "realtime_guard.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
// The default-versioned pthread_mutex_lock is what we replace; this binds
// the compatibility alias of the same C library function, so forwarding
// needs no dlsym (which itself takes locks while it resolves).
int etude_real_pthread_mutex_lock(pthread_mutex_t*);
}
// The alias carries the architecture's first glibc version.
#if defined(__aarch64__)
__asm__(".symver etude_real_pthread_mutex_lock,__pthread_mutex_lock@GLIBC_2.17");
#else
__asm__(".symver etude_real_pthread_mutex_lock,__pthread_mutex_lock@GLIBC_2.2.5");
#endif

namespace etude::test {
namespace {

thread_local bool t_realtime = false;
std::atomic<unsigned long> g_marked_thread{0};
// Set while a hook records a violation, so recording cannot recurse.
thread_local bool t_recording = false;

std::atomic<std::uint64_t> g_alloc{0}, g_free{0}, g_lock{0}, g_block{0};
std::atomic<const char*> g_first{nullptr};

enum class Kind { Alloc, Free, Lock, Block };

inline bool marked() {
    if (t_realtime) return true;
    const unsigned long m = g_marked_thread.load(std::memory_order_relaxed);
    return m != 0 && pthread_equal(pthread_self(), m);
}

inline void note(Kind k, const char* what) {
    if (t_recording || !marked()) return;
    t_recording = true;
    switch (k) {
        case Kind::Alloc:
            g_alloc.fetch_add(1);
            break;
        case Kind::Free:
            g_free.fetch_add(1);
            break;
        case Kind::Lock:
            g_lock.fetch_add(1);
            break;
        case Kind::Block:
            g_block.fetch_add(1);
            break;
    }
    const char* expected = nullptr;
    g_first.compare_exchange_strong(expected, what);
    t_recording = false;
}

template <typename F>
F next(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

void mark_thread(unsigned long id) {
    g_marked_thread = id;
}
void unmark_thread() {
    g_marked_thread = 0;
}

RealtimeScope::RealtimeScope() {
    t_realtime = true;
}
RealtimeScope::~RealtimeScope() {
    t_realtime = false;
}

RealtimeViolations realtime_violations() {
    RealtimeViolations v;
    v.allocations = g_alloc.load();
    v.frees = g_free.load();
    v.locks = g_lock.load();
    v.blocking_calls = g_block.load();
    if (const char* f = g_first.load()) v.first = f;
    return v;
}

void reset_realtime_violations() {
    g_alloc = g_free = g_lock = g_block = 0;
    g_first = nullptr;
}

}  // namespace etude::test

using etude::test::Kind;
using etude::test::note;

extern "C" {

void* malloc(size_t n) {
    note(Kind::Alloc, "malloc");
    return __libc_malloc(n);
}
void free(void* p) {
    note(Kind::Free, "free");
    __libc_free(p);
}
void* calloc(size_t n, size_t s) {
    note(Kind::Alloc, "calloc");
    return __libc_calloc(n, s);
}
void* realloc(void* p, size_t n) {
    note(Kind::Alloc, "realloc");
    return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
    note(Kind::Alloc, "memalign");
    return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
    note(Kind::Alloc, "aligned_alloc");
    return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
    note(Kind::Alloc, "posix_memalign");
    void* p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

int pthread_mutex_lock(pthread_mutex_t* m) {
    note(Kind::Lock, "pthread_mutex_lock");
    return etude_real_pthread_mutex_lock(m);
}

int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
    note(Kind::Block, "pthread_cond_wait");
    static auto real =
        etude::test::next<int (*)(pthread_cond_t*, pthread_mutex_t*)>("pthread_cond_wait");
    return real(c, m);
}
int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* t) {
    note(Kind::Block, "pthread_cond_timedwait");
    static auto real =
        etude::test::next<int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*)>(
            "pthread_cond_timedwait");
    return real(c, m, t);
}
int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clk,
                           const struct timespec* t) {
    note(Kind::Block, "pthread_cond_clockwait");
    static auto real = etude::test::next<int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t,
                                                 const struct timespec*)>("pthread_cond_clockwait");
    return real(c, m, clk, t);
}
int nanosleep(const struct timespec* req, struct timespec* rem) {
    note(Kind::Block, "nanosleep");
    static auto real =
        etude::test::next<int (*)(const struct timespec*, struct timespec*)>("nanosleep");
    return real(req, rem);
}
int clock_nanosleep(clockid_t clk, int flags, const struct timespec* req, struct timespec* rem) {
    note(Kind::Block, "clock_nanosleep");
    static auto real =
        etude::test::next<int (*)(clockid_t, int, const struct timespec*, struct timespec*)>(
            "clock_nanosleep");
    return real(clk, flags, req, rem);
}
int usleep(useconds_t us) {
    note(Kind::Block, "usleep");
    static auto real = etude::test::next<int (*)(useconds_t)>("usleep");
    return real(us);
}
ssize_t read(int fd, void* buf, size_t n) {
    note(Kind::Block, "read");
    static auto real = etude::test::next<ssize_t (*)(int, void*, size_t)>("read");
    return real(fd, buf, n);
}
ssize_t write(int fd, const void* buf, size_t n) {
    note(Kind::Block, "write");
    static auto real = etude::test::next<ssize_t (*)(int, const void*, size_t)>("write");
    return real(fd, buf, n);
}
int poll(struct pollfd* fds, nfds_t n, int timeout) {
    note(Kind::Block, "poll");
    static auto real = etude::test::next<int (*)(struct pollfd*, nfds_t, int)>("poll");
    return real(fds, n, timeout);
}
int sem_wait(sem_t* s) {
    note(Kind::Block, "sem_wait");
    static auto real = etude::test::next<int (*)(sem_t*)>("sem_wait");
    return real(s);
}

}  // extern "C"
