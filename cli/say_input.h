// What `etude say` speaks: the text from its arguments or standard input,
// or Piper's JSON lines, grouped into one run per stream.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "cli/command_line.h"
#include "engine/engine.h"

namespace etude::cli {

// What one stream speaks: a Piper speaker's run of --json-input lines, or
// all the text.
struct Utterances {
    using PhonemeIds = std::vector<std::int64_t>;
    std::string speaker;  // Piper streams: as --speaker takes it; "" the default
    std::vector<std::variant<std::string, PhonemeIds>> items;  // text or ids, in order
    bool ssml = false;  // the text items are SSML documents (--ssml)
};

// Reads and checks the whole input before any work: TEXT... or standard
// input, valid UTF-8 with something to speak, or (--json-input) Piper's JSON
// lines, consecutive lines of one speaker sharing a run. Throws UsageError
// for options that cannot be combined, etude::Error for bad input.
std::vector<Utterances> read_utterances(const CommandLine& args, const engine::StreamOptions& opts);

// The bytes of text in all runs (what decides whether progress is shown).
std::size_t text_bytes(const std::vector<Utterances>& runs);

// Pushes a run into its stream, each item a whole utterance; returns the
// sentences queued.
std::size_t push(engine::Stream& stream, const Utterances& run);

}  // namespace etude::cli
