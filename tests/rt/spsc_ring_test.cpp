#include "rt/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

using etude::rt::SpscRing;

TEST(SpscRing, capacity_rounds_up_to_a_power_of_two) {
    EXPECT_EQ(SpscRing<float>(1000).capacity(), 1024u);
    EXPECT_EQ(SpscRing<float>(1024).capacity(), 1024u);
    EXPECT_EQ(SpscRing<float>(0).capacity(), 2u);
}

TEST(SpscRing, full_ring_takes_only_what_fits_and_empty_ring_gives_nothing) {
    SpscRing<int> r(8);
    std::vector<int> in(11);
    for (int i = 0; i < 11; ++i) in[i] = i;
    EXPECT_EQ(r.write(in), 8u);
    EXPECT_EQ(r.write_available(), 0u);
    std::vector<int> out(20, -1);
    EXPECT_EQ(r.read(out), 8u);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i);
    EXPECT_EQ(r.read(out), 0u);
}

TEST(SpscRing, wraps_around_and_tracks_positions) {
    SpscRing<int> r(8);
    std::vector<int> buf(5), out(5);
    int next = 0, expect = 0;
    for (int round = 0; round < 10; ++round) {
        for (auto& v : buf) v = next++;
        ASSERT_EQ(r.write(buf), 5u);
        ASSERT_EQ(r.read(out), 5u);
        for (int v : out) EXPECT_EQ(v, expect++);
    }
    EXPECT_EQ(r.write_position(), 50u);
    EXPECT_EQ(r.read_position(), 50u);
    r.write(buf);
    EXPECT_EQ(r.discard(3), 3u);
    EXPECT_EQ(r.read_available(), 2u);
    EXPECT_EQ(r.discard(10), 2u);
}

TEST(SpscRing, concurrent_producer_and_consumer_see_every_item_in_order) {
    // Run under ThreadSanitizer too: any missing ordering shows up as a race.
    SpscRing<std::uint32_t> r(256);
    constexpr std::uint32_t kCount = 2'000'000;
    std::thread producer([&] {
        std::uint32_t block[37];
        std::uint32_t next = 0;
        while (next < kCount) {
            std::uint32_t n = 0;
            for (; n < 37 && next + n < kCount; ++n) block[n] = next + n;
            std::size_t done = 0;
            while (done < n)
                done += r.write(std::span<const std::uint32_t>(block + done, n - done));
            next += n;
        }
    });
    std::uint32_t expect = 0;
    std::uint32_t block[53];
    bool in_order = true;
    while (expect < kCount) {
        const std::size_t n = r.read(block);
        for (std::size_t i = 0; i < n; ++i) in_order &= block[i] == expect++;
    }
    producer.join();
    EXPECT_TRUE(in_order);
    EXPECT_EQ(r.read_available(), 0u);
}
