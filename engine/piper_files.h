/// \file
/// A Piper voice's files and text front end outside a stream, for tools:
/// the voices in the voice folders summarised for people (`etude voices`),
/// Piper's `--json-input` lines read and checked against a voice (`etude
/// say --json-input`), and a voice's phonemizer on its own (`etude
/// phonemize`). Streams speak Piper voices through Engine::create_stream();
/// Engine::list_voices() is the list of voices for front ends that choose
/// one.
///
/// Threads: any non-real-time thread; a PiperPhonemizer from one thread at
/// a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace etude::engine {

/// A Piper voice of the voice folders (Engine::voice_folders()), as
/// `etude voices` lists it.
struct PiperVoiceSummary {
    std::string name;            ///< "en_US-joe-medium"
    std::string model_path;      ///< its .onnx
    bool model_present = false;  ///< whether the .onnx is there beside its .json
    /// "English (United States), en_US, medium, 22050 Hz, 1 speaker": its
    /// language, language code, quality, rate and speakers (the first five
    /// names where it names them); empty when `problem` is set.
    std::string summary;
    std::string problem;  ///< why its config cannot be read; empty when it can
};

/// Every Piper voice of the voice folders, in folder order (a name found
/// twice: the first folder's), each summarised from its config.
std::vector<PiperVoiceSummary> summarize_piper_voices();

/// One speaker's run of consecutive `--json-input` lines (a Piper stream
/// speaks with one speaker).
struct PiperInputRun {
    /// Who speaks, as PiperVoiceOptions::speaker takes it: the speaker's name
    /// where the voice names it (a number could be another speaker's name),
    /// else its number.
    std::string speaker;
    /// Each line's text, or its phoneme ids (checked against the voice), in
    /// order.
    std::vector<std::variant<std::string, std::vector<std::int64_t>>> items;
};

/// Reads Piper's `--json-input`: one JSON object per line, {"text": ...} or
/// {"phoneme_ids": [...]}, each with an optional "speaker" (a name) or
/// "speaker_id" (a number, which wins); blank lines are skipped, other keys
/// ignored. `voice` is a Piper voice as PiperVoiceOptions::piper_voice names it;
/// `speaker` the speaker of lines that name none ("": the voice's default).
/// Throws etude::Error naming `source` and the line number ("stdin:3: ...")
/// for a line that is not such an object, naming the voice's config for a
/// speaker it lacks or phoneme ids outside its map; VoiceNotFound when
/// there is no such voice. Reads the whole input before returning.
std::vector<PiperInputRun> read_piper_json_input(std::string_view input, const std::string& voice,
                                                 const std::string& speaker,
                                                 const std::string& source = "stdin");

/// One sentence through a Piper voice's front end.
struct PiperSentencePhonemes {
    std::string text;                   ///< the sentence as written, trimmed
    std::vector<std::string> phonemes;  ///< espeak-ng's phonemes, one codepoint (or cluster) each
    std::vector<std::int64_t> ids;      ///< the voice's phoneme ids, laid out ^ _ (p _)* $
    std::size_t missing = 0;            ///< phonemes the voice's map lacks, skipped as Piper does
    std::vector<std::string> missing_phonemes;  ///< each of those once, in order of appearance
};

/// A Piper voice's text front end: text into sentences of phonemes and
/// phoneme ids, as Piper makes them (espeak-ng), each sentence one call of
/// the voice's network.
class PiperPhonemizer {
  public:
    /// The front end of `voice` (as PiperVoiceOptions::piper_voice names it).
    /// Throws VoiceNotFound when there is no such voice, etude::Error for a
    /// config that cannot be read.
    explicit PiperPhonemizer(const std::string& voice);
    ~PiperPhonemizer();                                      ///< frees the front end
    PiperPhonemizer(PiperPhonemizer&&) noexcept;             ///< movable
    PiperPhonemizer& operator=(PiperPhonemizer&&) noexcept;  ///< movable

    /// The sentences of `text`; throws etude::Error for invalid UTF-8.
    std::vector<PiperSentencePhonemes> phonemize(const std::string& text) const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace etude::engine
