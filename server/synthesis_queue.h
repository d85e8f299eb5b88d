// Wyoming's syntheses as events on its loop, with no thread of their own.
// A request takes a turn to synthesise (SynthesisSlots, shared with the
// HTTP endpoint) at once, or a place in line here, first come first served,
// for at most --queue-timeout; past every turn and waiting place it is
// refused (busy). Its stream's audio listener (Stream::set_audio_listener)
// then puts its session on the ready list and rings the loop, which reads
// what is made and sends it (wyoming_session.h). A thousand syntheses cost
// a thousand streams, not a thousand threads.
//
// Threads: the listeners from any thread (the engine's); everything else
// on the loop thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "server/event_loop.h"
#include "server/synthesis_slots.h"

namespace etude::server {

class SynthesisQueue {
  public:
    // A session: its socket and a number no other session of the loop has
    // had (a socket's number is used again once it closes).
    struct Key {
        int fd = -1;
        std::uint64_t serial = 0;
        bool operator==(const Key&) const = default;
    };

    SynthesisQueue(SynthesisSlots& slots, EventLoop& loop, std::chrono::milliseconds timeout);
    ~SynthesisQueue();  // gives back the places of those still waiting
    SynthesisQueue(const SynthesisQueue&) = delete;
    SynthesisQueue& operator=(const SynthesisQueue&) = delete;

    enum class Admit { Now, Waiting, Busy };
    // Now: a turn is taken, the caller's to give back (SpeechJob::adopt_turn).
    // Waiting: settle() grants it later, or says it expired.
    Admit admit(Key key);
    // Leaves the line; true when `key` was in it.
    bool withdraw(Key key);
    // Turns freed go to those waiting, in order (`granted`: the turn is
    // theirs); those that waited past the timeout leave (`expired`).
    void settle(const std::function<void(Key)>& granted, const std::function<void(Key)>& expired);
    std::size_t waiting() const { return waiting_.size(); }

    // The listener for `key`'s stream. `pending`, the session's: set by the
    // first call after the session last cleared it, which alone queues the
    // key and rings the loop.
    std::function<void()> listener(Key key, std::shared_ptr<std::atomic<bool>> pending);
    // The sessions whose streams have called, in the order they did.
    std::vector<Key> take_ready();

  private:
    struct Ready {
        std::mutex mu;
        std::vector<Key> keys;
    };
    struct Waiter {
        Key key;
        std::chrono::steady_clock::time_point since;
    };
    SynthesisSlots& slots_;
    EventLoop& loop_;
    const std::chrono::milliseconds timeout_;
    std::deque<Waiter> waiting_;
    // Shared with the listeners, which a stream may call until it is destroyed.
    const std::shared_ptr<Ready> ready_ = std::make_shared<Ready>();
};

}  // namespace etude::server
