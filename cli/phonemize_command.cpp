// etude phonemize: a Piper voice's text front end on its own, in the JSON
// lines of Piper's phonemizer (text, phonemes, phoneme_ids per sentence).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "engine/error.h"
#include "engine/piper_files.h"

namespace etude::cli {
namespace {

engine::PiperPhonemizer open_phonemizer(const std::string& voice) {
    try {
        return engine::PiperPhonemizer(voice);
    } catch (const VoiceNotFound& e) {
        throw Error(std::string(e.what()) + "; see 'etude voices'");
    }
}

// Prints the sentences of one piece of text; returns the phonemes skipped.
std::size_t print_sentences(const engine::PiperPhonemizer& phonemizer, const std::string& text,
                            std::vector<std::string>& missing) {
    std::size_t skipped = 0;
    for (const auto& s : phonemizer.phonemize(text)) {
        nlohmann::ordered_json line;
        line["text"] = s.text;
        line["phonemes"] = s.phonemes;
        line["phoneme_ids"] = s.ids;
        std::puts(line.dump().c_str());
        skipped += s.missing;
        for (const auto& p : s.missing_phonemes)
            if (std::find(missing.begin(), missing.end(), p) == missing.end()) missing.push_back(p);
    }
    if (std::fflush(stdout) != 0) throw Error("cannot write to standard output");
    return skipped;
}

}  // namespace

int phonemize_command(int argc, char** argv) {
    return run_command("phonemize", [&] {
        CommandLine args(
            "etude phonemize --voice VOICE [TEXT...]",
            "Turns TEXT (or each line of standard input) into a Piper voice's phonemes\n"
            "and phoneme ids, as Piper does (espeak-ng), and prints one JSON line per\n"
            "sentence: {\"text\": ..., \"phonemes\": [...], \"phoneme_ids\": [...]}. Each\n"
            "sentence is one call of the voice's network.");
        args.positionals("TEXT...", "the text, joined with single spaces");
        args.option("--voice", "VOICE",
                    "a Piper voice: PATH/VOICE.onnx (VOICE.onnx.json beside it), the .json, or a "
                    "name found in the voice folders (see 'etude voices')");
        args.footer(
            "Phonemes the voice's phoneme_id_map lacks are skipped, as Piper does, and\n"
            "counted on standard error. Empty and blank lines print nothing.\n"
            "exit status: 0 success; 1 a bad voice or text; 2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        const auto voice = args.value("--voice");
        if (!voice) throw UsageError("--voice is required");
        const engine::PiperPhonemizer phonemizer = open_phonemizer(*voice);

        std::size_t skipped = 0;
        std::vector<std::string> missing;
        if (!args.positional().empty()) {
            std::string text;
            for (const auto& w : args.positional()) text += (text.empty() ? "" : " ") + w;
            skipped += print_sentences(phonemizer, text, missing);
        } else {
            std::size_t number = 0;
            for (std::string line; std::getline(std::cin, line);) {
                ++number;
                try {
                    skipped += print_sentences(phonemizer, line, missing);
                } catch (const Error& e) {
                    throw Error("stdin:" + std::to_string(number) + ": " + e.what());
                }
            }
        }
        if (skipped) {
            std::string list;
            for (const auto& p : missing) list += " '" + p + "'";
            std::fprintf(stderr,
                         "etude phonemize: %zu phoneme%s not in the voice's map, skipped:%s\n",
                         skipped, skipped == 1 ? "" : "s", list.c_str());
        }
        return 0;
    });
}

}  // namespace etude::cli
