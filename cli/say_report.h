// What `etude say` tells on standard error: the progress line while it
// speaks, and --stats at the end.
#pragma once

#include <chrono>

#include "engine/engine.h"

namespace etude::cli {

// The progress line of a long text on a terminal, at most five times a
// second; finish() ends the line if one was shown.
class Progress {
  public:
    Progress(bool enabled, double rate) : enabled_(enabled), rate_(rate) {}
    void update(const engine::StreamStats& s, bool force = false);
    void finish();

  private:
    bool enabled_;
    double rate_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point last_{};
};

// A run of --json-input lines with another speaker is a stream of its own:
// its counters add to the runs' before it (the first run keeps its first
// audio; the rest, the latency and devices, are the last run's).
void add_run(engine::StreamStats& total, const engine::StreamStats& run, bool first);

// --stats: the stream's counters, then where its vocoder or decoder ran.
void print_stats(const engine::StreamStats& s, const engine::StreamOptions& o, double rate);

}  // namespace etude::cli
