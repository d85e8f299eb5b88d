// The command loop: reads the server's commands from standard input and
// answers them, as speech-dispatcher 0.11.4's server expects.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "speechd/line_reader.h"
#include "speechd/module_config.h"
#include "speechd/reply_writer.h"
#include "speechd/speaker.h"
#include "speechd/speech_settings.h"
#include "speechd/symbol_table.h"
#include "speechd/voice_list.h"

namespace etude::speechd {

/// The module's side of the output-module protocol. Runs on the main
/// thread; speaking happens on Speaker's thread, so this loop is always
/// reading and a STOP is acted on as soon as it arrives.
class Protocol {
  public:
    Protocol(LineReader& in, ReplyWriter& out, ModuleConfig config);
    ~Protocol();
    /// Serves until QUIT (returns 0) or the end of input (returns 0 too:
    /// the server has gone and there is nobody to report to).
    int run();

  private:
    enum class MessageKind { Text, Char, Key, SoundIcon };
    using Params = std::vector<std::pair<std::string, std::string>>;
    struct ParamBlock {
        Params params;  // the well-formed "key=value" lines
        // A line without '=' or without a value: speech-dispatcher's
        // modules answer the block with 302, having set the rest.
        bool bad_syntax = false;
    };

    // Each returns false when the input has ended.
    bool init();
    bool audio();
    bool loglevel();
    bool set();
    bool speak(MessageKind kind);
    void list_voices(const std::string& command);
    void debug(const std::string& command);

    // A parameter block, up to its "." line; nullopt at the end of input.
    std::optional<ParamBlock> read_params();
    // A data block, dot-unescaped; nullopt at the end of input. `lines`
    // gets the number of lines; past kLargestMessage bytes the rest is
    // read and dropped, and `too_large` is set.
    std::optional<std::string> read_data(std::size_t& lines, bool& too_large);
    // The Engine, made on first use (INIT normally); false when it failed.
    bool ensure_engine();
    // The message as the engine is to speak it: SSML read, symbols spoken
    // as the punctuation settings ask, spelt, capitals announced.
    std::vector<Piece> pieces_for(MessageKind kind, const std::string& data,
                                  const ModuleVoice& voice);

    LineReader& in_;
    ReplyWriter& out_;
    ModuleConfig config_;
    SpeechSettings settings_;
    std::unique_ptr<engine::Engine> engine_;
    std::unique_ptr<VoiceList> voices_;
    std::unique_ptr<Speaker> speaker_;  // after engine_: stopped and joined first
    std::string init_error_;
    SymbolTables symbols_;  // speech-dispatcher's symbols.dic, by language
};

}  // namespace etude::speechd
