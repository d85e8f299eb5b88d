// Gives the memory that streams freed back to the system once none is left.
//
// glibc's malloc keeps what a thread frees in that thread's arena for the
// next allocation, and a process with many threads has many arenas (up to
// 8 per core). A burst of streams (serve's start-up measurement starts up to
// 64, a burst of clients as many) leaves tens to hundreds of MB free but
// held, and an idle server kept them for good. When the last live stream of
// the process ends, malloc_trim(0) hands every arena's free pages back
// (madvise on whole free pages, not only the tops of the heaps).
//
// Threads: any. The trim runs on the thread that ends the last stream (a
// few ms for a heap of a few hundred MB), never in an audio callback: a
// stream's insides are never destroyed there.
#pragma once

#include <cstddef>

namespace etude::engine {

// Held by each stream's insides for its whole life (declared first, so it
// is let go after everything else the stream owns has been freed).
class LiveStreamMark {
  public:
    LiveStreamMark();
    ~LiveStreamMark();
    LiveStreamMark(const LiveStreamMark&) = delete;
    LiveStreamMark& operator=(const LiveStreamMark&) = delete;

    // Streams alive in the process now.
    static std::size_t live();
};

// Hands the allocator's free memory back to the system now (malloc_trim).
void give_back_free_memory();

}  // namespace etude::engine
