#include "engine/scheduling/block_records.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "engine/partial_path.h"

namespace etude::engine {

void BlockRecorder::record(const BlockRecord& rec) {
    std::lock_guard lock(mu_);
    if (records_.size() < kCapacity)
        records_.push_back(rec);
    else
        records_[written_ % kCapacity] = rec;
    ++written_;
    ++by_processor_[rec.processor];
    if (rec.finished_ns > rec.deadline_ns) ++late_;
    if (rec.reduced_tier) ++reduced_;
}

void BlockRecorder::note_fallback() {
    std::lock_guard lock(mu_);
    ++fallbacks_;
}

std::vector<BlockRecord> BlockRecorder::records(std::size_t max) const {
    std::lock_guard lock(mu_);
    const std::size_t n = std::min({max, written_, kCapacity});
    std::vector<BlockRecord> out;
    out.reserve(n);
    for (std::size_t i = written_ - n; i < written_; ++i) out.push_back(records_[i % kCapacity]);
    return out;
}

void BlockRecorder::fill_stats(StreamStats& s) const {
    std::lock_guard lock(mu_);
    s.blocks = by_processor_[0] + by_processor_[1] + by_processor_[2] + by_processor_[3];
    s.blocks_gpu = by_processor_[BlockRecord::Gpu];
    s.blocks_primary = by_processor_[BlockRecord::Primary];
    s.blocks_fallback = by_processor_[BlockRecord::Fallback];
    s.blocks_ahead = by_processor_[BlockRecord::Ahead];
    s.fallbacks = fallbacks_;
    s.late_blocks = late_;
    s.reduced_tier_blocks = reduced_;
}

namespace {

[[noreturn]] void cannot_write(const std::string& path) {
    throw Error("cannot write trace file '" + path + "': " + std::strerror(errno));
}

}  // namespace

// Stream's, defined beside the trace writer whose failures it foresees.
void Stream::check_trace_path(const std::string& path) {
    const std::string partial = partial_path(path);
    if (!std::ofstream(partial)) cannot_write(path);
    std::remove(partial.c_str());
}

void write_chrome_trace(
    const std::string& path, const std::vector<BlockRecord>& records,
    const std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>>& kernel_timings) {
    const std::string partial = partial_path(path);
    std::ofstream out(partial);
    if (!out) cannot_write(path);
    const std::int64_t t0 = records.empty() ? 0 : records.front().dispatched_ns;
    static const char* kNames[] = {"cpu-primary", "cpu-fallback", "cpu-ahead", "gpu"};
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    for (int p = 0; p < 4; ++p)
        out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << p + 1
            << ",\"args\":{\"name\":\"" << kNames[p] << "\"}},\n";
    for (const auto& r : records) {
        out << "{\"name\":\"block " << r.index << (r.reduced_tier ? " reduced" : "")
            << (r.fell_back ? " fallback" : "")
            << "\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,\"tid\":"
            << static_cast<int>(r.processor) + 1 << ",\"ts\":" << (r.started_ns - t0) / 1000.0
            << ",\"dur\":" << (r.finished_ns - r.started_ns) / 1000.0
            << ",\"args\":{\"slack_ms\":" << r.slack_ms() << ",\"compute_ms\":" << r.compute_ms()
            << ",\"tier\":\"" << (r.reduced_tier ? "reduced" : "full") << "\"}},\n";
        out << "{\"name\":\"deadline " << r.index
            << "\",\"cat\":\"deadline\",\"ph\":\"i\",\"s\":\"t\""
            << ",\"pid\":1,\"tid\":" << static_cast<int>(r.processor) + 1
            << ",\"ts\":" << (r.deadline_ns - t0) / 1000.0 << "},\n";
    }
    // Device time per kernel (events on OpenCL/CUDA), as counters at the end.
    const double end_us = records.empty() ? 0 : (records.back().finished_ns - t0) / 1000.0;
    for (const auto& [device, timings] : kernel_timings) {
        if (timings.empty()) continue;
        out << "{\"name\":\"kernel ms total (" << device
            << ")\",\"ph\":\"C\",\"pid\":2,\"ts\":" << end_us << ",\"args\":{";
        for (std::size_t i = 0; i < timings.size(); ++i)
            out << (i ? "," : "") << "\"" << timings[i].name << "\":" << timings[i].total_ms;
        out << "}},\n";
    }
    out << "{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":1,\"ts\":0}\n]}\n";
    out.close();
    if (!out || std::rename(partial.c_str(), path.c_str()) != 0) {
        const int err = errno;
        std::remove(partial.c_str());
        errno = err;
        cannot_write(path);
    }
}

}  // namespace etude::engine
