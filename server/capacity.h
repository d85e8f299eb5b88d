// How many real-time streams this machine serves with a voice: measured when
// the server starts, by speaking a fixed two-sentence reply once with that
// voice and timing it. `etude serve` admits that many syntheses at once
// (unless --max-syntheses says otherwise): a request past them waits for a
// turn rather than slowing every stream below real time.
#pragma once

#include <cstddef>
#include <string>

#include "engine/engine.h"

namespace etude::server {

struct Capacity {
    double speed = 0;         // seconds of speech made per second, one stream
    std::size_t streams = 0;  // real-time streams admitted at once
};

// Speaks the reply with `options` on `engine` (loading the voice if it is
// not yet) and returns the speed and the streams it allows: the speed less
// two fifths of headroom (capacity.cpp says why), at least 1. Throws etude::Error when the voice
// cannot speak. Takes a fraction of a second for the voices shipped.
Capacity measure_capacity(engine::Engine& engine, const engine::StreamOptions& options);

// The streams admitted for a stream speed: that speed less two fifths, at
// least 1 (measure_capacity()'s rule; `etude bench` applies it to its median).
std::size_t streams_at_speed(double speed);

}  // namespace etude::server
