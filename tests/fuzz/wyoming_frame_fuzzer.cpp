// libFuzzer target for the Wyoming frame reader (server/wyoming_frame.h):
// any byte stream, cut into reads anywhere, must give events or one
// FrameError, never crash, hang or buffer past the limits. Each event read
// must also survive a round trip: encoded and read again, it is the same
// event. The first input byte sets the read size, as a socket cuts the
// stream wherever it likes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/wyoming_frame.h"

namespace {

void check_round_trip(const etude::server::WyomingEvent& event) {
    etude::server::WyomingFrameReader again;
    again.feed(etude::server::encode_wyoming_event(event));
    const auto r = again.next();
    if (!r.event || r.event->type != event.type || r.event->data != event.data ||
        r.event->payload != event.payload)
        std::abort();  // an event we read, written back, reads differently
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::size_t step = std::size_t{data[0]} + 1;
    const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
    const etude::server::FrameLimits limits;
    etude::server::WyomingFrameReader reader(limits);
    for (std::size_t at = 0; at < stream.size(); at += step) {
        reader.feed(stream.substr(at, step));
        for (;;) {
            const auto r = reader.next();
            if (r.event) {
                check_round_trip(*r.event);
                continue;
            }
            break;  // an error (the reader stays failed) or more bytes needed
        }
        // Held bytes stay within one frame's limits plus this read.
        if (reader.buffered() >
            limits.max_header_bytes + limits.max_data_bytes + limits.max_payload_bytes + step + 1)
            std::abort();
    }
    return 0;
}
