#include "cli/say_input.h"

#include <cstdio>

#include "engine/error.h"
#include "engine/piper_files.h"
#include "engine/text_check.h"
#include "engine/utf8.h"

namespace etude::cli {
namespace {

std::string read_all_stdin() {
    std::string text;
    char buf[65536];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) text.append(buf, n);
    return text;
}

// Piper's --json-input: consecutive lines with the same speaker share a
// stream (a Piper stream speaks with one speaker).
std::vector<Utterances> read_json_input(const std::string& input,
                                        const engine::StreamOptions& opts) {
    const auto& piper = std::get<engine::PiperVoiceOptions>(opts.voice);
    std::vector<Utterances> runs;
    for (auto& run : engine::read_piper_json_input(input, piper.piper_voice, piper.speaker))
        runs.push_back({std::move(run.speaker), std::move(run.items)});
    if (runs.empty()) throw Error("no text to speak: standard input holds no JSON lines");
    return runs;
}

}  // namespace

std::vector<Utterances> read_utterances(const CommandLine& args,
                                        const engine::StreamOptions& opts) {
    const bool json_input = args.flag("--json-input");
    const auto* piper = std::get_if<engine::PiperVoiceOptions>(&opts.voice);
    if (json_input && !piper) throw UsageError("--json-input needs a Piper voice (--voice)");
    if (json_input && !args.positional().empty())
        throw UsageError("--json-input reads standard input; give no TEXT");
    const bool ssml = args.flag("--ssml");
    if (ssml && json_input) throw UsageError("--ssml and --json-input cannot be combined");
    std::string text;
    if (!args.positional().empty()) {
        for (const auto& w : args.positional()) text += (text.empty() ? "" : " ") + w;
    } else {
        text = read_all_stdin();
    }
    if (auto bad = utf8::find_bad_sequence(text))
        throw Error("text is not valid UTF-8 (" + utf8::describe(*bad) + ")");
    if (json_input) return read_json_input(text, opts);
    if (!engine::has_speakable_text(text))
        throw Error("no text to speak: the input is empty or only white space");
    std::vector<Utterances> runs;
    runs.push_back({piper ? piper->speaker : std::string(), {std::move(text)}, ssml});
    return runs;
}

std::size_t text_bytes(const std::vector<Utterances>& runs) {
    std::size_t bytes = 0;
    for (const auto& run : runs)
        for (const auto& item : run.items)
            if (const auto* t = std::get_if<std::string>(&item)) bytes += t->size();
    return bytes;
}

std::size_t push(engine::Stream& stream, const Utterances& run) {
    std::size_t sentences = 0;
    for (const auto& item : run.items) {
        if (const auto* ids = std::get_if<Utterances::PhonemeIds>(&item)) {
            stream.push_phoneme_ids(*ids);
            ++sentences;
        } else {
            const auto& text = std::get<std::string>(item);
            sentences += run.ssml ? stream.push_ssml(text) : stream.push_text(text);
            sentences += stream.end_input();  // each item is a whole utterance
        }
    }
    return sentences;
}

}  // namespace etude::cli
