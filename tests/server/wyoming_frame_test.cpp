// The Wyoming framing: well-formed events in any cut come out whole; every
// kind of malformed frame is an error value, never a crash or an unbounded
// buffer.
#include "server/wyoming_frame.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {

using etude::server::encode_wyoming_event;
using etude::server::FrameLimits;
using etude::server::WyomingEvent;
using etude::server::WyomingFrameReader;
using nlohmann::json;

// Everything the reader makes of `bytes` fed in one piece.
struct Parsed {
    std::vector<WyomingEvent> events;
    std::optional<std::string> error;
    bool partial = false;
};
Parsed parse(const std::string& bytes, FrameLimits limits = {}) {
    WyomingFrameReader r(limits);
    r.feed(bytes);
    Parsed p;
    for (;;) {
        auto res = r.next();
        if (res.error) {
            p.error = res.error->what;
            break;
        }
        if (!res.event) break;
        p.events.push_back(std::move(*res.event));
    }
    p.partial = r.partial();
    return p;
}

TEST(WyomingFrame, header_data_and_payload_round_trip) {
    WyomingEvent ev{"audio-chunk",
                    {{"rate", 16000}, {"width", 2}, {"channels", 1}},
                    std::string("\x01\x00\xff\x7f", 4)};
    const auto bytes = encode_wyoming_event(ev);
    // The header line carries the lengths, the data follows it as JSON.
    const auto line = json::parse(bytes.substr(0, bytes.find('\n')));
    EXPECT_EQ(line["type"], "audio-chunk");
    EXPECT_EQ(line["payload_length"], 4);
    EXPECT_TRUE(line.contains("data_length"));
    EXPECT_FALSE(line.contains("data"));
    const auto p = parse(bytes);
    ASSERT_FALSE(p.error);
    ASSERT_EQ(p.events.size(), 1u);
    EXPECT_EQ(p.events[0].type, "audio-chunk");
    EXPECT_EQ(p.events[0].data, ev.data);
    EXPECT_EQ(p.events[0].payload, ev.payload);
}

TEST(WyomingFrame, data_bytes_are_merged_over_header_data) {
    // As wyoming's event.py: header "data" updated by the data bytes' keys.
    const std::string data = R"({"text":"from bytes","extra":1})";
    const std::string bytes =
        R"({"type":"synthesize","data":{"text":"in header","voice":{"name":"slt"}},"data_length":)" +
        std::to_string(data.size()) + "}\n" + data;
    const auto p = parse(bytes);
    ASSERT_FALSE(p.error);
    ASSERT_EQ(p.events.size(), 1u);
    EXPECT_EQ(p.events[0].data["text"], "from bytes");
    EXPECT_EQ(p.events[0].data["voice"]["name"], "slt");
    EXPECT_EQ(p.events[0].data["extra"], 1);
}

TEST(WyomingFrame, events_cut_at_every_byte_come_out_whole) {
    std::string stream;
    stream += encode_wyoming_event({"describe", json::object(), {}});
    stream += encode_wyoming_event({"synthesize", {{"text", "Hello. Wörld!"}}, {}});
    stream += encode_wyoming_event({"audio-chunk", {{"rate", 8000}}, std::string(37, 'x')});
    for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
        WyomingFrameReader r;
        std::vector<WyomingEvent> got;
        for (auto piece : {stream.substr(0, cut), stream.substr(cut)}) {
            r.feed(piece);
            while (auto e = r.next().event) got.push_back(std::move(*e));
        }
        ASSERT_EQ(got.size(), 3u) << "cut at " << cut;
        EXPECT_EQ(got[1].data["text"], "Hello. Wörld!");
        EXPECT_EQ(got[2].payload.size(), 37u);
        EXPECT_FALSE(r.partial());
    }
}

TEST(WyomingFrame, a_truncated_frame_is_partial_not_an_event) {
    const auto bytes =
        encode_wyoming_event({"audio-chunk", {{"rate", 8000}}, std::string(100, 'x')});
    for (std::size_t keep : {std::size_t{5}, bytes.find('\n') + 1, bytes.size() - 1}) {
        const auto p = parse(bytes.substr(0, keep));
        EXPECT_TRUE(p.events.empty()) << keep;
        EXPECT_FALSE(p.error) << keep;
        EXPECT_TRUE(p.partial) << keep;
    }
}

TEST(WyomingFrame, malformed_headers_are_errors) {
    const char* bad[] = {
        "not json\n",
        "[1,2,3]\n",
        "\"a string\"\n",
        "{}\n",
        "{\"type\":5}\n",
        "{\"type\":\"\"}\n",
        "{\"type\":\"x\",\"data\":[1]}\n",
        "{\"type\":\"x\",\"data\":\"text\"}\n",
        "{\"type\":\"x\",\"data_length\":-1}\n",
        "{\"type\":\"x\",\"payload_length\":-5}\n",
        "{\"type\":\"x\",\"data_length\":1.5}\n",
        "{\"type\":\"x\",\"data_length\":\"10\"}\n",
        "{\"type\":\"x\",\"payload_length\":true}\n",
        "{\"type\":\"x\",\"payload_length\":99999999999999999999999}\n",
        "{\"type\":\"x\",\"payload_length\":18446744073709551615}\n",
        "{\"type\":\"x\",\"data_length\":4}\nnope",
        "{\"type\":\"x\",\"data_length\":3}\n[1]",
        "{\"type\":\"x\",\"data\":{\"a\":\"\xff\xfe\"}}\n",  // invalid UTF-8
        "{\"type\":\"x\",\"data\":{\"a\":\"\\ud800\"}}\n",   // a lone surrogate
    };
    for (const char* b : bad) {
        const auto p = parse(b);
        EXPECT_TRUE(p.error.has_value()) << b;
        EXPECT_TRUE(p.events.empty()) << b;
    }
}

TEST(WyomingFrame, lengths_over_the_caps_are_refused_before_buffering) {
    FrameLimits limits;
    limits.max_data_bytes = 100;
    limits.max_payload_bytes = 1000;
    EXPECT_TRUE(parse("{\"type\":\"x\",\"data_length\":101}\n", limits).error);
    EXPECT_TRUE(parse("{\"type\":\"x\",\"payload_length\":1001}\n", limits).error);
    EXPECT_FALSE(parse("{\"type\":\"x\",\"payload_length\":1000}\n", limits).error);
}

TEST(WyomingFrame, a_header_line_without_end_is_refused_at_the_cap) {
    FrameLimits limits;
    limits.max_header_bytes = 1024;
    WyomingFrameReader r(limits);
    r.feed("{\"type\":\"");
    EXPECT_FALSE(r.next().error);
    r.feed(std::string(2000, 'a'));
    const auto res = r.next();
    ASSERT_TRUE(res.error);
    EXPECT_NE(res.error->what.find("longer than"), std::string::npos);
    EXPECT_EQ(r.buffered(), 0u);  // nothing kept after the failure
    r.feed("more");
    EXPECT_EQ(r.buffered(), 0u);
    EXPECT_TRUE(r.next().error);  // stays failed
}

TEST(WyomingFrame, deep_nesting_is_refused) {
    std::string deep =
        "{\"type\":\"x\",\"data\":{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}}\n";
    EXPECT_TRUE(parse(deep).error);
    // Brackets inside strings are text, not nesting.
    std::string text = "{\"type\":\"x\",\"data\":{\"a\":\"" + std::string(100, '[') + "\"}}\n";
    EXPECT_FALSE(parse(text).error);
}

TEST(WyomingFrame, null_lengths_and_data_are_absent_and_other_keys_are_ignored) {
    const auto p = parse(
        "{\"type\":\"ping\",\"data\":null,\"data_length\":null,\"payload_length\":0,"
        "\"version\":\"1.10.2\",\"future\":[1]}\n");
    ASSERT_FALSE(p.error);
    ASSERT_EQ(p.events.size(), 1u);
    EXPECT_TRUE(p.events[0].data.is_object());
    EXPECT_TRUE(p.events[0].payload.empty());
}

TEST(WyomingFrame, random_bytes_never_crash_and_stay_bounded) {
    std::mt19937 rng(15);
    FrameLimits limits;
    limits.max_header_bytes = 4096;
    limits.max_data_bytes = 4096;
    limits.max_payload_bytes = 4096;
    const std::string valid = encode_wyoming_event({"synthesize", {{"text", "Hi."}}, "pay"});
    for (int round = 0; round < 2000; ++round) {
        std::string bytes = valid + valid;
        const int edits = 1 + static_cast<int>(rng() % 6);
        for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<char>(rng());
        WyomingFrameReader r(limits);
        for (std::size_t i = 0; i < bytes.size(); i += 7) {
            r.feed(bytes.substr(i, 7));
            for (;;) {
                auto res = r.next();
                if (res.error || !res.event) break;
            }
            ASSERT_LE(r.buffered(), 3 * 4096u + 7);
        }
    }
}

}  // namespace
