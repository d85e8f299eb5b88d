// The streams that have woken a kind of worker (EngineWorkers' front ends,
// or its render workers) since that kind last found nothing to do there:
// what those workers look through, so that a look costs the streams with
// work, not every stream of the engine (a server's thousand mostly idle
// connections). Each stream is held once, in the order it first woke them;
// a stream freed while pending leaves an expired entry, which a new stream
// at the same address takes over when it wakes.
//
// Threads: none of its own; every call under the owner's lock (EngineWorkers'
// mu_). Holds weak references only: a stream's last reference must never be
// dropped under that lock (its destructor joins a producer that may be
// waiting for it), so look() hands the streams it locked to `seen`, for the
// caller to drop after unlocking.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace etude::engine {

template <class Stream>
class PendingStreams {
  public:
    // `stream` has (or may have) work for these workers.
    void add(Stream& stream) {
        auto [at, added] = at_.try_emplace(&stream);
        if (added)
            at->second = pending_.insert(pending_.end(), {&stream, stream.weak_from_this()});
        else
            at->second->stream = stream.weak_from_this();
    }

    // What a look at one stream found.
    enum class Found {
        Nothing,  // no work for these workers: it leaves the list until it wakes them again
        Keep,     // it stays pending; the look goes on
        Stop,     // it stays pending; the look ends here
    };
    // Looks at the pending streams in order with `look(shared_ptr)` (a Found)
    // until one says Stop. A stream gone leaves the list. Every stream
    // looked at goes to `seen`. Returns how many were looked at.
    template <class Look>
    std::uint64_t look(Look look, std::vector<std::shared_ptr<Stream>>& seen) {
        std::uint64_t looks = 0;
        for (auto p = pending_.begin(); p != pending_.end();) {
            auto s = p->stream.lock();
            const Found found = s ? look(s) : Found::Nothing;
            if (s) {
                ++looks;
                seen.push_back(std::move(s));
            }
            if (found == Found::Stop) break;
            if (found == Found::Keep) {
                ++p;
            } else {
                at_.erase(p->at);
                p = pending_.erase(p);
            }
        }
        return looks;
    }

    // Moves `stream`, if pending, to the end of the order: a stream just
    // given work waits behind the others for its next (round-robin).
    void to_back(const Stream& stream) {
        const auto at = at_.find(&stream);
        if (at != at_.end()) pending_.splice(pending_.end(), pending_, at->second);
    }

    std::size_t size() const { return pending_.size(); }

  private:
    struct Entry {
        const Stream* at = nullptr;
        std::weak_ptr<Stream> stream;
    };
    std::list<Entry> pending_;
    std::unordered_map<const Stream*, typename std::list<Entry>::iterator> at_;
};

}  // namespace etude::engine
