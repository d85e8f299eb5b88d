#include "server/wyoming_frame.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace etude::server {

using nlohmann::json;

namespace {

// A length field: absent or null is 0; otherwise a whole number in
// [0, cap]. Python's client accepts floats like 3.0 only by accident of
// readexactly; we take integers only.
std::optional<std::string> read_length(const json& header, const char* key, std::size_t cap,
                                       std::size_t& out) {
    out = 0;
    const auto it = header.find(key);
    if (it == header.end() || it->is_null()) return std::nullopt;
    if (it->is_number_unsigned()) {
        const auto v = it->get<std::uint64_t>();
        if (v > cap)
            return std::string(key) + " " + std::to_string(v) + " is over the limit of " +
                   std::to_string(cap) + " bytes";
        out = static_cast<std::size_t>(v);
        return std::nullopt;
    }
    if (it->is_number_integer()) return std::string(key) + " is negative";
    return std::string(key) + " is not a whole number";
}

}  // namespace

bool json_nesting_exceeds(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

void WyomingFrameReader::feed(std::string_view bytes) {
    if (!failed_) buffer_.append(bytes);
}

WyomingFrameReader::Result WyomingFrameReader::fail(std::string what) {
    failed_ = true;
    buffer_.clear();
    buffer_.shrink_to_fit();
    pending_.reset();
    return {std::nullopt, FrameError{std::move(what)}};
}

WyomingFrameReader::Result WyomingFrameReader::next() {
    if (failed_) return {std::nullopt, FrameError{"the stream already failed"}};
    if (!pending_) {
        const auto nl = buffer_.find('\n', scanned_);
        if (nl == std::string::npos) {
            scanned_ = buffer_.size();
            if (buffer_.size() > limits_.max_header_bytes)
                return fail("header line longer than " + std::to_string(limits_.max_header_bytes) +
                            " bytes");
            return {};
        }
        if (nl > limits_.max_header_bytes)
            return fail("header line longer than " + std::to_string(limits_.max_header_bytes) +
                        " bytes");
        const std::string_view line(buffer_.data(), nl);
        if (json_nesting_exceeds(line, limits_.max_json_depth))
            return fail("header nests deeper than " + std::to_string(limits_.max_json_depth));
        json header = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (header.is_discarded()) return fail("header line is not valid JSON");
        if (!header.is_object()) return fail("header line is not a JSON object");
        const auto type = header.find("type");
        if (type == header.end() || !type->is_string() ||
            type->get_ref<const std::string&>().empty())
            return fail("header has no \"type\" string");
        WyomingEvent ev;
        ev.type = type->get<std::string>();
        if (const auto d = header.find("data"); d != header.end() && !d->is_null()) {
            if (!d->is_object()) return fail("header \"data\" is not a JSON object");
            ev.data = std::move(*d);
        }
        if (auto bad = read_length(header, "data_length", limits_.max_data_bytes, data_length_))
            return fail(*bad);
        if (auto bad =
                read_length(header, "payload_length", limits_.max_payload_bytes, payload_length_))
            return fail(*bad);
        buffer_.erase(0, nl + 1);
        scanned_ = 0;
        pending_ = std::move(ev);
    }
    if (buffer_.size() < data_length_ + payload_length_) return {};
    WyomingEvent ev = std::move(*pending_);
    pending_.reset();
    if (data_length_ > 0) {
        const std::string_view bytes(buffer_.data(), data_length_);
        if (json_nesting_exceeds(bytes, limits_.max_json_depth))
            return fail("data nests deeper than " + std::to_string(limits_.max_json_depth));
        json extra = json::parse(bytes, nullptr, false);
        if (extra.is_discarded()) return fail("data is not valid JSON");
        if (!extra.is_object()) return fail("data is not a JSON object");
        for (auto& [key, value] : extra.items()) ev.data[key] = std::move(value);
    }
    ev.payload.assign(buffer_, data_length_, payload_length_);
    buffer_.erase(0, data_length_ + payload_length_);
    data_length_ = payload_length_ = 0;
    // Keep a long-lived connection's buffer from holding on to a huge frame.
    if (buffer_.capacity() > 2 * limits_.max_header_bytes && buffer_.size() < 4096)
        buffer_.shrink_to_fit();
    return {std::move(ev), std::nullopt};
}

std::string encode_wyoming_event(const WyomingEvent& event) {
    json header = {{"type", event.type}, {"version", kWyomingVersion}};
    std::string data;
    if (!event.data.empty()) {
        // Invalid UTF-8 in a string we were handed must not throw here.
        data = event.data.dump(-1, ' ', false, json::error_handler_t::replace);
        header["data_length"] = data.size();
    }
    if (!event.payload.empty()) header["payload_length"] = event.payload.size();
    std::string out = header.dump();
    out.reserve(out.size() + 1 + data.size() + event.payload.size());
    out += '\n';
    out += data;
    out += event.payload;
    return out;
}

}  // namespace etude::server
