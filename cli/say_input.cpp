#include "cli/say_input.h"

#include <cstdio>

#include "engine/error.h"
#include "engine/piper/json_input.h"
#include "engine/piper/phoneme_ids.h"
#include "engine/piper/voice_catalog.h"
#include "engine/piper/voice_config.h"
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

// How StreamOptions::speaker names speaker `id`: by its name where the
// voice names it (a number could be another speaker's name), else by number.
std::string speaker_name(const piper::VoiceConfig& voice, int id) {
    for (const auto& [name, i] : voice.speaker_id_map)
        if (i == id) return name;
    return std::to_string(id);
}

// Piper's --json-input: one JSON object per line; consecutive lines with
// the same speaker share a stream (a Piper stream speaks with one speaker).
std::vector<Utterances> read_json_input(const std::string& input,
                                        const engine::StreamOptions& opts) {
    const auto voice = piper::read_voice_config(piper::require_voice(opts.piper_voice).config_path);
    const int fallback =
        opts.speaker.empty() ? voice.default_speaker_id : voice.speaker_id(opts.speaker);
    std::vector<Utterances> runs;
    std::size_t number = 0, begin = 0;
    while (begin < input.size()) {
        std::size_t end = input.find('\n', begin);
        if (end == std::string::npos) end = input.size();
        const std::string_view line(input.data() + begin, end - begin);
        begin = end + 1;
        ++number;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
        const auto parsed = piper::parse_json_input_line(line, "stdin:" + std::to_string(number));
        const std::string speaker =
            speaker_name(voice, piper::speaker_for(parsed, voice, fallback));
        if (runs.empty() || runs.back().speaker != speaker) runs.push_back({speaker, {}});
        auto& items = runs.back().items;
        if (parsed.phoneme_ids) {
            piper::check_phoneme_ids(*parsed.phoneme_ids, voice);
            items.emplace_back(*parsed.phoneme_ids);
        } else {
            items.emplace_back(parsed.text.value_or(""));
        }
    }
    if (runs.empty()) throw Error("no text to speak: standard input holds no JSON lines");
    return runs;
}

}  // namespace

std::vector<Utterances> read_utterances(const CommandLine& args,
                                        const engine::StreamOptions& opts) {
    const bool json_input = args.flag("--json-input");
    if (json_input && opts.piper_voice.empty())
        throw UsageError("--json-input needs a Piper voice (--voice)");
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
    runs.push_back({opts.speaker, {std::move(text)}, ssml});
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
