// Connections per listener: the total and the per-address limits, places
// given back with their tickets, and refusals reported at most once a second.
#include "server/connection_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace {

using etude::server::ConnectionLimiter;
using etude::server::peer_host;

TEST(ConnectionLimiter, one_address_is_held_to_its_limit_while_others_get_in) {
    ConnectionLimiter limiter(10, 3);
    std::string why;
    std::vector<ConnectionLimiter::Ticket> held;
    for (int i = 0; i < 3; ++i) held.push_back(*limiter.admit("10.0.0.1", why));
    EXPECT_FALSE(limiter.admit("10.0.0.1", why));
    EXPECT_NE(why.find("too many connections from 10.0.0.1 (limit 3 per address)"),
              std::string::npos)
        << why;
    EXPECT_TRUE(limiter.admit("10.0.0.2", why));  // given back at once
    held.pop_back();
    EXPECT_TRUE(limiter.admit("10.0.0.1", why));
    EXPECT_EQ(limiter.open(), 2u);
}

TEST(ConnectionLimiter, the_total_limit_counts_every_address_and_unix_sockets) {
    ConnectionLimiter limiter(4, 1);
    std::string why;
    std::vector<ConnectionLimiter::Ticket> held;
    held.push_back(*limiter.admit("10.0.0.1", why));
    held.push_back(*limiter.admit("10.0.0.2", why));
    held.push_back(*limiter.admit("unix", why));  // no per-address limit
    held.push_back(*limiter.admit("unix", why));
    EXPECT_FALSE(limiter.admit("10.0.0.3", why));
    EXPECT_NE(why.find("too many connections (limit 4)"), std::string::npos) << why;
    held.clear();
    EXPECT_EQ(limiter.open(), 0u);
    EXPECT_TRUE(limiter.admit("10.0.0.3", why));
}

TEST(ConnectionLimiter, refusals_are_reported_at_most_once_a_second_with_their_count) {
    ConnectionLimiter limiter(1, 1);
    std::string why;
    auto held = limiter.admit("10.0.0.1", why);
    const auto t0 = std::chrono::steady_clock::now();
    using std::chrono::milliseconds;
    EXPECT_FALSE(limiter.admit("10.0.0.1", why));
    EXPECT_EQ(limiter.refusal_report(why, t0), "refused: " + why) << "one refusal: no count";
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.admit("10.0.0.1", why));
    EXPECT_FALSE(limiter.refusal_report(why, t0 + milliseconds(999)));  // within the second
    EXPECT_FALSE(limiter.admit("10.0.0.1", why));
    // The next line, a second on, stands for the six refused since the last.
    EXPECT_EQ(limiter.refusal_report(why, t0 + milliseconds(1000)),
              "refused: " + why + " (6 refused since the last line)");
    EXPECT_FALSE(limiter.admit("10.0.0.1", why));
    EXPECT_EQ(limiter.refusal_report(why, t0 + milliseconds(2000)), "refused: " + why)
        << "one refused since: the count starts again";
}

TEST(ConnectionLimiter, peer_host_drops_the_port) {
    EXPECT_EQ(peer_host("127.0.0.1:3341"), "127.0.0.1");
    EXPECT_EQ(peer_host("[::1]:3341"), "::1");
    EXPECT_EQ(peer_host("unix"), "unix");
}

}  // namespace
