// The step pool (engine/scheduling/step_pool.h): members stepped by a few
// threads, the one due first first, never one member on two threads at
// once, a wake during a step honoured after it, a look-again kept to its
// time, and a member's leave() waiting for its step in progress.
#include "engine/scheduling/step_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "rt/monotonic_clock.h"
#include "support/wait_until.h"

using namespace etude::engine;

namespace {

using etude::test::wait_until;

WorkDue due_at(std::int64_t deadline_ns) {
    WorkDue d;
    d.deadline_ns = deadline_ns;
    return d;
}

// A member that holds a one-thread pool's thread until let go, so that the
// members woken meanwhile all wait together when it does.
class HeldThread {
  public:
    explicit HeldThread(StepPool& pool)
        : member_(pool.join([this](std::int64_t, std::int64_t) {
              while (hold_.load()) std::this_thread::yield();
              return StepNext::idle();
          })) {
        member_.wake(due_at(0));
        wait_until([&] { return pool.steps() == 1; });
    }
    void let_go() { hold_ = false; }

  private:
    std::atomic<bool> hold_{true};
    StepPool::Member member_;
};

}  // namespace

TEST(StepPool, each_member_is_stepped_until_it_says_idle_and_never_on_two_threads_at_once) {
    StepPool pool(4);
    constexpr int kMembers = 64, kSteps = 50;
    std::vector<std::atomic<int>> steps(kMembers), inside(kMembers);
    std::atomic<int> overlaps{0};
    std::vector<StepPool::Member> members;
    for (int i = 0; i < kMembers; ++i)
        members.push_back(pool.join([&, i](std::int64_t, std::int64_t) {
            if (inside[i].fetch_add(1) != 0) overlaps.fetch_add(1);
            std::this_thread::yield();
            const int n = steps[i].fetch_add(1) + 1;
            inside[i].fetch_sub(1);
            return n < kSteps ? StepNext::ready(due_at(n)) : StepNext::idle();
        }));
    // Woken from several threads at once, some many times: still one step
    // at a time per member.
    std::vector<std::thread> wakers;
    for (int t = 0; t < 3; ++t)
        wakers.emplace_back([&] {
            for (auto& m : members) m.wake(due_at(0));
        });
    for (auto& t : wakers) t.join();
    wait_until([&] {
        for (auto& s : steps)
            if (s.load() < kSteps) return false;
        return true;
    });
    for (auto& n : steps) EXPECT_EQ(n.load(), kSteps);
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(pool.members(), std::size_t(kMembers));
    members.clear();
    EXPECT_EQ(pool.members(), 0u);
}

TEST(StepPool, the_member_due_first_is_stepped_first) {
    StepPool pool(1);
    std::mutex mu;
    std::vector<int> order;
    HeldThread held(pool);
    const std::vector<std::int64_t> dues{50, 10, 40, 20, 30};
    std::vector<StepPool::Member> members;
    for (std::size_t i = 0; i < dues.size(); ++i)
        members.push_back(pool.join([&, i](std::int64_t, std::int64_t) {
            std::lock_guard lock(mu);
            order.push_back(int(dues[i]));
            return StepNext::idle();
        }));
    for (std::size_t i = 0; i < dues.size(); ++i) members[i].wake(due_at(dues[i]));
    held.let_go();
    wait_until([&] { return pool.steps() == 1 + dues.size(); });
    std::lock_guard lock(mu);
    EXPECT_EQ(order, (std::vector<int>{10, 20, 30, 40, 50}));
}

TEST(StepPool, a_wake_during_a_step_steps_the_member_again_after_it) {
    StepPool pool(2);
    std::atomic<int> steps{0};
    std::atomic<bool> in_step{false}, release{false};
    StepPool::Member m = pool.join([&](std::int64_t, std::int64_t) {
        if (steps.fetch_add(1) == 0) {
            in_step = true;
            while (!release.load()) std::this_thread::yield();
        }
        return StepNext::idle();  // it says idle: only the wake brings it back
    });
    m.wake(due_at(0));
    wait_until([&] { return in_step.load(); });
    m.wake(due_at(0));
    release = true;
    wait_until([&] { return steps.load() == 2; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(steps.load(), 2) << "an idle member was stepped with no wake";
}

TEST(StepPool, a_member_looks_again_at_its_time_not_before) {
    StepPool pool(1);
    std::atomic<int> steps{0};
    std::atomic<std::int64_t> asked_at{0}, stepped_at{0};
    constexpr std::int64_t kLater = 30'000'000;  // 30 ms
    StepPool::Member m = pool.join([&](std::int64_t, std::int64_t) {
        if (steps.fetch_add(1) == 0) {
            asked_at = etude::rt::now_ns() + kLater;
            return StepNext::look_again(asked_at.load());
        }
        stepped_at = etude::rt::now_ns();
        return StepNext::idle();
    });
    m.wake(due_at(0));
    wait_until([&] { return steps.load() == 2; });
    EXPECT_GE(stepped_at.load(), asked_at.load());
}

TEST(StepPool, leaving_waits_for_the_step_in_progress_and_no_step_comes_after) {
    StepPool pool(2);
    std::atomic<bool> in_step{false}, release{false}, left{false};
    std::atomic<int> steps_after_leave{0};
    auto m = std::make_unique<StepPool::Member>(pool.join([&](std::int64_t, std::int64_t) {
        if (left.load()) steps_after_leave.fetch_add(1);
        in_step = true;
        while (!release.load()) std::this_thread::yield();
        return StepNext::ready(due_at(0));  // would run for ever
    }));
    m->wake(due_at(0));
    wait_until([&] { return in_step.load(); });
    std::thread leaver([&] {
        m->leave();
        left = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_FALSE(left.load()) << "leave() returned while the member's step ran";
    release = true;
    leaver.join();
    EXPECT_TRUE(left.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(steps_after_leave.load(), 0);
    EXPECT_EQ(pool.members(), 0u);
}

// A wake whose due is unknown (a reader made room) keeps the member's place;
// a later due does not replace a sooner one.
TEST(StepPool, a_wake_without_a_due_or_with_a_later_one_keeps_the_members_place) {
    StepPool pool(1);
    std::mutex mu;
    std::vector<char> order;
    HeldThread held(pool);
    const auto member = [&](char name) {
        return pool.join([&, name](std::int64_t, std::int64_t) {
            std::lock_guard lock(mu);
            order.push_back(name);
            return StepNext::idle();
        });
    };
    StepPool::Member a = member('a'), b = member('b'), c = member('c');
    a.wake(due_at(30));
    b.wake(due_at(20));
    a.wake();  // no due: still 30
    c.wake(due_at(10));
    b.wake(due_at(40));  // later than its 20: still 20
    held.let_go();
    wait_until([&] { return pool.steps() == 4; });
    std::lock_guard lock(mu);
    EXPECT_EQ(order, (std::vector<char>{'c', 'b', 'a'}));
}
