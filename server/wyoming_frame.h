// The Wyoming wire format, one event at a time, with limits that make a
// hostile or broken peer an error value rather than a crash or a memory
// sink. Checked against the `wyoming` Python package (event.py):
//
//   {"type": "...", "data": {...}, "data_length": N, "payload_length": M}\n
//   N bytes: a JSON object merged over the header's "data" (its keys win)
//   M bytes: the payload (audio for audio-chunk)
//
// "data", "data_length" and "payload_length" are optional; a "version" key
// (and any other) is ignored. Python treats a negative length as absent; we
// refuse it, and anything that is not a whole number in range.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace etude::server {

// The protocol version written into every header we send: that of the
// `wyoming` package the tests talk to (tests/python-requirements.txt).
inline constexpr const char* kWyomingVersion = "1.10.2";

struct WyomingEvent {
    std::string type;
    nlohmann::json data = nlohmann::json::object();  // always an object
    std::string payload;
};

// Caps on what one frame may hold. A frame past a cap is an error before
// its bytes are buffered, so a peer cannot make us hold more than these.
struct FrameLimits {
    std::size_t max_header_bytes = 64 * 1024;  // the JSON line, newline excluded
    std::size_t max_data_bytes = 1024 * 1024;
    // A TTS server takes no audio from its clients: payloads are refused
    // past this, which keeps a connection's buffer near 1 MiB at most.
    std::size_t max_payload_bytes = 64 * 1024;
    int max_json_depth = 32;  // nesting of arrays and objects
};

// Why a frame was refused; `what` says which part and why.
struct FrameError {
    std::string what;
};

// Incremental reader: feed() bytes as they arrive, then call next() until
// it has nothing more. After an error the reader stays failed: a stream with
// a broken frame cannot be resynchronised, so the connection must close.
class WyomingFrameReader {
  public:
    explicit WyomingFrameReader(FrameLimits limits = {}) : limits_(limits) {}

    // Appends received bytes. Bytes past a failed frame are discarded.
    void feed(std::string_view bytes);

    struct Result {
        std::optional<WyomingEvent> event;  // a complete event
        std::optional<FrameError> error;    // the stream is broken
        // Neither: more bytes are needed.
    };
    Result next();

    // True when bytes of an unfinished frame are buffered: the peer closing
    // now would truncate a frame.
    bool partial() const { return !failed_ && (pending_ || !buffer_.empty()); }
    bool failed() const { return failed_; }
    // True while the header line of a frame is arriving (partial(), and
    // its line not yet whole); then its data and payload are.
    bool reading_header() const { return partial() && !pending_; }
    // Bytes held now (bounded by the limits plus one read's worth).
    std::size_t buffered() const { return buffer_.size(); }

  private:
    Result fail(std::string what);

    FrameLimits limits_;
    std::string buffer_;
    std::size_t scanned_ = 0;  // bytes of buffer_ known to hold no newline
    // The header of the frame being read, once its line has been parsed.
    std::optional<WyomingEvent> pending_;
    std::size_t data_length_ = 0, payload_length_ = 0;
    bool failed_ = false;
};

// One event in wire form: header line, data, payload.
std::string encode_wyoming_event(const WyomingEvent& event);

// Whether `text` nests arrays or objects deeper than `max_depth` (strings
// are skipped). nlohmann's parser is iterative, but a deep document is still
// work and memory for nothing; we refuse it before parsing.
bool json_nesting_exceeds(std::string_view text, int max_depth);

}  // namespace etude::server
