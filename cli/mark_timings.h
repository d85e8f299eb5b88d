// etude say --timings FILE: the words and marks a stream reaches (each
// word's start, and SSML <mark/>), one JSON line each, as the audio is read:
// {"type":"word" or "mark","name":...,"sample":N,"seconds":S}, the sample
// counted in the output's samples.
// Written to FILE.partial and renamed at finish(), so a run that fails
// leaves no timings file (as the WAV writer does).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "engine/engine.h"
#include "engine/error.h"

namespace etude::cli {

class MarkTimings {
  public:
    // Opens FILE.partial; throws etude::Error if it cannot be written.
    explicit MarkTimings(const std::string& path);
    ~MarkTimings();
    MarkTimings(const MarkTimings&) = delete;
    MarkTimings& operator=(const MarkTimings&) = delete;
    // Writes the marks `stream` has reached; `offset`: output samples
    // before this stream's first (earlier streams of the same output).
    void drain(engine::Stream& stream, double rate, std::uint64_t offset);
    // Flushes and renames FILE.partial to FILE; throws etude::Error on failure.
    void finish();

  private:
    std::string path_, partial_;
    std::ofstream out_;
    bool finished_ = false;
};

}  // namespace etude::cli
