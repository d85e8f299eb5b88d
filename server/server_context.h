// What every connection of a server shares: the one engine, the voices, the
// synthesis slots, the limits and the request log.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>

#include "engine/engine.h"
#include "server/end_punctuation.h"
#include "server/synthesis_slots.h"
#include "server/voice_catalog.h"
#include "server/wyoming_frame.h"

namespace etude::server {

struct ServerLimits {
    std::size_t max_syntheses = 8;                  // running at once, all connections
    std::size_t max_waiting = 32;                   // waiting for a turn; past that: busy
    std::size_t max_connections = 256;              // per listener
    std::size_t max_connections_per_address = 128;  // per listener, from one client address
    std::size_t max_text_bytes = 100000;  // per request (a whole stream's chunks together)
    std::chrono::milliseconds queue_timeout{30000};  // longest wait for a turn
    std::chrono::milliseconds idle_timeout{60000};   // a connection that sends nothing
    std::chrono::milliseconds write_timeout{10000};  // a client that reads nothing
    // Whole-message deadlines, not per read, so trickling bytes does not
    // extend them: an HTTP request head (a Wyoming frame's header line) from
    // its first byte, and the body (the frame's data and payload) after it.
    std::chrono::milliseconds header_timeout{10000};
    std::chrono::milliseconds body_timeout{30000};
    FrameLimits frames;
};

// One line per request on standard error, whole lines from any thread.
class RequestLog {
  public:
    explicit RequestLog(bool enabled) : enabled_(enabled) {}
    void write(std::string line) {
        if (!enabled_) return;
        // A client's words (a voice or speaker name) may hold a line break
        // or a terminal's control bytes: one line stays one line.
        for (char& c : line)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
        std::lock_guard lock(mu_);
        std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
    }

  private:
    bool enabled_;
    std::mutex mu_;
};

// How the Wyoming front end speaks, as wyoming-piper's options of the
// same names say it.
struct WyomingOptions {
    // Samples in each audio-chunk, the request's last one shorter
    // (--samples-per-chunk).
    std::size_t samples_per_chunk = 1024;
    // synthesize-start/-chunk/-stop understood and advertised
    // (--no-streaming: ignored, as wyoming-piper ignores them).
    bool streaming = true;
};

struct ServerContext {
    engine::Engine& engine;
    const VoiceCatalog& voices;
    SynthesisSlots& slots;
    const ServerLimits& limits;
    RequestLog& log;
    // Wyoming's requests end in one of these (--auto-punctuation).
    EndPunctuation end_punctuation{};
    WyomingOptions wyoming{};
};

}  // namespace etude::server
