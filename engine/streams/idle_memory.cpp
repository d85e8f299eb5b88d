#include "engine/streams/idle_memory.h"

#include <malloc.h>

#include <atomic>

namespace etude::engine {
namespace {

std::atomic<std::size_t> g_live{0};

}  // namespace

LiveStreamMark::LiveStreamMark() {
    g_live.fetch_add(1, std::memory_order_relaxed);
}

LiveStreamMark::~LiveStreamMark() {
    // Only the stream that leaves none trims; one starting meanwhile only
    // finds the memory given back a moment early.
    if (g_live.fetch_sub(1, std::memory_order_acq_rel) == 1) give_back_free_memory();
}

std::size_t LiveStreamMark::live() {
    return g_live.load(std::memory_order_relaxed);
}

void give_back_free_memory() {
#ifdef __GLIBC__
    ::malloc_trim(0);
#endif
}

}  // namespace etude::engine
