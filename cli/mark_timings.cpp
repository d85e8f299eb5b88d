#include "cli/mark_timings.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace etude::cli {

MarkTimings::MarkTimings(const std::string& path)
    : path_(path), partial_(path + ".partial"), out_(partial_, std::ios::trunc) {
    if (!out_) throw Error("cannot write timings file '" + path + "': " + std::strerror(errno));
}

MarkTimings::~MarkTimings() {
    if (finished_) return;
    out_.close();
    std::remove(partial_.c_str());
}

void MarkTimings::drain(engine::Stream& stream, double rate, std::uint64_t offset) {
    engine::SpeechMark mark;
    while (stream.next_mark(mark)) {
        nlohmann::ordered_json line;
        line["type"] = mark.kind == engine::SpeechMark::Word ? "word" : "mark";
        line["name"] = mark.name;
        line["sample"] = offset + mark.sample;
        line["seconds"] = static_cast<double>(offset + mark.sample) / rate;
        out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    }
}

void MarkTimings::finish() {
    out_.close();
    if (!out_ || std::rename(partial_.c_str(), path_.c_str()) != 0)
        throw Error("writing timings file '" + path_ + "' failed: " + std::strerror(errno));
    finished_ = true;
}

}  // namespace etude::cli
