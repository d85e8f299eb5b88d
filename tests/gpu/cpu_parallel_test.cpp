// gpu/cpu/cpu_parallel.h: every job runs exactly once, ranges cover [0, n)
// exactly on their alignment, chunks come in equal numbers per worker, a
// job's exception reaches the caller, and a loop started from inside a job
// runs on that job's thread alone.
#include "gpu/cpu/cpu_parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::gpu::cpu {
namespace {

TEST(CpuParallel, every_job_runs_exactly_once) {
    for (int jobs : {0, 1, 2, 3, 17, 1000}) {
        std::vector<std::atomic<int>> runs(static_cast<std::size_t>(jobs));
        parallel_for(jobs, [&](int j) { runs[static_cast<std::size_t>(j)]++; });
        for (int j = 0; j < jobs; ++j) EXPECT_EQ(runs[static_cast<std::size_t>(j)], 1) << j;
    }
}

TEST(CpuParallel, ranges_cover_every_element_once_on_their_alignment) {
    for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 1000u, 100003u})
        for (int jobs : {1, 2, 3, 8})
            for (std::size_t align : {1u, 16u}) {
                std::vector<std::atomic<int>> hits(n);
                std::atomic<int> misaligned{0};
                parallel_ranges(n, jobs, align, [&](std::size_t begin, std::size_t end) {
                    if (begin % align != 0 || end <= begin) misaligned++;
                    for (std::size_t i = begin; i < end; ++i) hits[i]++;
                });
                EXPECT_EQ(misaligned, 0) << "n=" << n << " jobs=" << jobs;
                for (std::size_t i = 0; i < n; ++i)
                    ASSERT_EQ(hits[i], 1) << "n=" << n << " jobs=" << jobs << " i=" << i;
            }
}

TEST(CpuParallel, a_jobs_exception_reaches_the_caller_after_the_other_jobs_ran) {
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(50,
                              [&](int j) {
                                  ran++;
                                  if (j == 7) throw std::runtime_error("job 7");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran, 50);
}

TEST(CpuParallel, a_loop_inside_a_job_runs_on_that_thread) {
    if (worker_count() < 2) GTEST_SKIP() << "one worker here (one CPU or OMP_NUM_THREADS=1)";
    std::atomic<int> inner_workers{0}, inner_runs{0};
    parallel_for(2, [&](int) {
        inner_workers += worker_count();
        parallel_for(4, [&](int) { inner_runs++; });
    });
    EXPECT_EQ(inner_workers, 2);  // 1 in each job
    EXPECT_EQ(inner_runs, 8);
}

TEST(CpuParallel, jobs_for_gives_one_job_per_grain_within_the_workers) {
    EXPECT_EQ(jobs_for(0, 100), 1);
    EXPECT_EQ(jobs_for(99, 100), 1);
    EXPECT_EQ(jobs_for(100000, 100), worker_count());
}

TEST(CpuParallel, balanced_chunks_give_every_worker_the_same_number) {
    // The case that prompted it: eight chunks of 984 and one of 382 for two
    // workers, now ten of 840 (the last 694).
    EXPECT_EQ(balanced_chunk(8254, 984, 64, 2, 24), 840);
    for (int workers : {1, 2, 3, 4})
        for (int total : {1, 23, 64, 100, 1000, 2100, 8192, 8254, 100003})
            for (int chunk : {24, 240, 504, 984, 100000}) {
                const int c = balanced_chunk(total, chunk, 64, workers, 24);
                const int chunks = (total + c - 1) / c;
                const std::string where = "total=" + std::to_string(total) +
                                          " chunk=" + std::to_string(chunk) +
                                          " workers=" + std::to_string(workers);
                ASSERT_GE(c, 1) << where;
                // Never longer than asked, never below min_chunk unless asked.
                EXPECT_LE(c, chunk) << where;
                if (chunks > 1) {
                    EXPECT_GE(c, std::min(chunk, 64)) << where;
                }
                // One worker keeps its chunk; several get one each or an
                // equal number of them.
                if (workers == 1) {
                    EXPECT_EQ(c, chunk) << where;
                } else if (chunks > workers && c >= 64) {
                    // The busiest worker's share, within a tile of a
                    // tenth over an equal one.
                    const double busiest = double((chunks + workers - 1) / workers) * c;
                    EXPECT_LE(busiest, 1.1 * total / workers + 24) << where;
                }
            }
}

}  // namespace
}  // namespace etude::gpu::cpu
