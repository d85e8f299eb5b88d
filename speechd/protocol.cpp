#include "speechd/protocol.h"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "engine/utf8.h"
#include "speechd/log.h"

namespace etude::speechd {

namespace {

// A message larger than this is refused (301) rather than held in memory:
// far beyond any screen reader's message, small enough not to hurt.
constexpr std::size_t kLargestMessage = 64u << 20;

std::string trim_right(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
    return s;
}

// Threads made while this lives start with every signal blocked (they
// inherit the mask): the engine's workers and the speaking thread must
// leave signals to the main thread.
class SignalsBlocked {
  public:
    SignalsBlocked() {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved_);
    }
    ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;

  private:
    sigset_t saved_;
};

// "shift_a", "kp-enter" -> words the front end reads.
std::string key_words(std::string key) {
    if (key.size() > 1)
        std::replace_if(
            key.begin(), key.end(), [](char c) { return c == '_' || c == '-'; }, ' ');
    return key;
}

// cap_let_recogn=spell: each capital letter spoken alone (a CHAR, or a
// letter of spelt text) is announced, "A" -> "capital A".
std::string announce_capitals(const std::string& spelt) {
    std::string out;
    for (std::size_t i = 0; i < spelt.size(); ++i) {
        const char c = spelt[i];
        const bool alone =
            (i == 0 || spelt[i - 1] == ' ') && (i + 1 == spelt.size() || spelt[i + 1] == ' ');
        if (alone && c >= 'A' && c <= 'Z') out += "capital ";
        out += c;
    }
    return out;
}

}  // namespace

Protocol::Protocol(LineReader& in, ReplyWriter& out, ModuleConfig config)
    : in_(in), out_(out), config_(std::move(config)), symbols_(config_.symbols_folder) {}

Protocol::~Protocol() {
    speaker_.reset();  // before the engine its streams belong to
}

int Protocol::run() {
    while (auto line = in_.next()) {
        if (out_.broken()) break;
        const std::string command = trim_right(*line);
        bool more = true;
        if (command == "INIT")
            more = init();
        else if (command == "AUDIO")
            more = audio();
        else if (command == "LOGLEVEL")
            more = loglevel();
        else if (command == "SET")
            more = set();
        else if (command == "SPEAK")
            more = speak(MessageKind::Text);
        else if (command == "CHAR")
            more = speak(MessageKind::Char);
        else if (command == "KEY")
            more = speak(MessageKind::Key);
        else if (command == "SOUND_ICON")
            more = speak(MessageKind::SoundIcon);
        else if (command == "LIST VOICES" || command.rfind("LIST VOICES ", 0) == 0)
            list_voices(command);
        else if (command == "STOP") {
            if (speaker_) speaker_->stop();  // no reply: 703 (or nothing, when idle) says it
        } else if (command == "PAUSE") {
            if (speaker_) speaker_->pause();  // no reply: 704 at the next mark
        } else if (command.rfind("DEBUG", 0) == 0) {
            debug(command);
        } else if (command == "QUIT") {
            if (speaker_) {
                speaker_->stop();
                speaker_->wait_idle();
            }
            out_.send("210 OK QUIT\n");
            return 0;
        } else {
            log_line(2, "unknown command '" + command.substr(0, 80) + "'");
            out_.send("300 ERR UNKNOWN COMMAND\n");
        }
        if (!more) break;
    }
    return 0;
}

bool Protocol::ensure_engine() {
    if (engine_) return true;
    if (!init_error_.empty()) return false;
    try {
        SignalsBlocked blocked;
        voices_ = std::make_unique<VoiceList>(config_);
        engine::Engine::Options options;
        options.preload_voices = engine::Engine::voices();
        options.preload_backend = config_.backend;
        auto engine = std::make_unique<engine::Engine>(options);
        for (const auto& v : voices_->voices())
            if (v.preload) engine->preload_voice(v.piper);
        engine_ = std::move(engine);
        speaker_ = std::make_unique<Speaker>(*engine_, out_);
        return true;
    } catch (const std::exception& e) {
        init_error_ = e.what();
        log_line(0, "cannot start the engine: " + init_error_);
        voices_.reset();
        return false;
    }
}

bool Protocol::init() {
    if (!ensure_engine()) {
        // One line: the server reads the INIT reply line by line, and a
        // newline inside the message would break it.
        std::string why = init_error_;
        std::replace(why.begin(), why.end(), '\n', ' ');
        out_.send("399-" + why + "\n399 ERR CANT INIT MODULE\n");
        return false;  // the reference modules exit after a failed INIT
    }
    const ModuleVoice& v = voices_->default_voice();
    out_.send("299-sd_etude: LibEtude ready, " + std::to_string(voices_->voices().size()) +
              " voices, default " + v.name + "\n299 OK LOADED SUCCESSFULLY\n");
    return true;
}

std::optional<Protocol::ParamBlock> Protocol::read_params() {
    ParamBlock block;
    while (auto line = in_.next()) {
        if (*line == ".") return block;
        const auto eq = line->find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == line->size()) {
            log_line(2, "parameter line not KEY=VALUE: " + line->substr(0, 80));
            block.bad_syntax = true;
            continue;
        }
        block.params.emplace_back(line->substr(0, eq), line->substr(eq + 1));
    }
    return std::nullopt;
}

bool Protocol::audio() {
    out_.send("207 OK RECEIVING AUDIO SETTINGS\n");
    const auto block = read_params();
    if (!block) return false;
    if (block->bad_syntax) {
        out_.send("302 ERROR BAD SYNTAX\n");
        return true;
    }
    bool server = false;
    for (const auto& [key, value] : block->params)
        if (key == "audio_output_method") server = value == "server";
    // The module has no audio output of its own: it only ever sends its
    // audio to the server (705). Refusing another method tells the server
    // so; it offers "server" first, so this answer is normally 203.
    if (server) {
        out_.send("203 OK AUDIO INITIALIZED\n");
    } else {
        // The reference modules' answer to a method they cannot use
        // (module_process.c); why goes to the log.
        log_line(1, "AUDIO: sd_etude plays through the server only (audio_output_method=server)");
        out_.send("303 ERROR INVALID PARAMETER OR VALUE\n");
    }
    return true;
}

bool Protocol::loglevel() {
    out_.send("207 OK RECEIVING LOGLEVEL SETTINGS\n");
    const auto block = read_params();
    if (!block) return false;
    // As module_utils.c takes it: log_level and a whole number, else 303.
    bool invalid = false;
    for (const auto& [key, value] : block->params) {
        char* end = nullptr;
        const long level = std::strtol(value.c_str(), &end, 10);
        if (key != "log_level" || end == value.c_str()) {
            invalid = true;
            continue;
        }
        g_log_level = static_cast<int>(level);
    }
    out_.send(block->bad_syntax ? "302 ERROR BAD SYNTAX\n"
              : invalid         ? "303 ERROR INVALID PARAMETER OR VALUE\n"
                                : "203 OK LOGLEVEL SET\n");
    return true;
}

bool Protocol::set() {
    out_.send("203 OK RECEIVING SETTINGS\n");
    const auto block = read_params();
    if (!block) return false;
    // Each good value is set, whatever else the block holds, as the
    // reference modules do; the reply says if something was not.
    bool invalid = false;
    for (const auto& [key, value] : block->params)
        if (!settings_.apply(key, value)) invalid = true;
    if (block->bad_syntax)
        out_.send("302 ERROR BAD SYNTAX\n");
    else if (invalid)
        out_.send("303 ERROR INVALID PARAMETER OR VALUE\n");
    else
        out_.send("203 OK SETTINGS RECEIVED\n");
    return true;
}

void Protocol::list_voices(const std::string& command) {
    if (!ensure_engine()) {
        out_.send("304 CANT LIST VOICES\n");
        return;
    }
    // LIST VOICES [LANGUAGE [VARIANT]]: speech-dispatcher 0.12 passes a
    // client's filter on (and asks again without it if a module answers 300).
    std::istringstream words(command.substr(std::string_view("LIST VOICES").size()));
    std::string language, variant;
    words >> language >> variant;
    out_.send(voices_->list_reply(language, variant));
}

void Protocol::debug(const std::string& command) {
    // The log already goes to the file the server chose (standard error);
    // a second debug file would add nothing.
    if (command.rfind("DEBUG ON", 0) == 0)
        out_.send("200 OK DEBUGGING ON\n");
    else if (command == "DEBUG OFF")
        out_.send("200 OK DEBUGGING OFF\n");
    else
        out_.send("302 ERROR BAD SYNTAX\n");
}

std::optional<std::string> Protocol::read_data(std::size_t& lines, bool& too_large) {
    std::string data;
    lines = 0;
    too_large = false;
    while (auto line = in_.next()) {
        if (*line == ".") return data;
        // The server doubles a line's leading dot; one goes.
        std::string_view text(*line);
        if (!text.empty() && text.front() == '.') text.remove_prefix(1);
        if (too_large || data.size() + text.size() + 1 > kLargestMessage) {
            too_large = true;
            data.clear();
            continue;
        }
        if (lines > 0) data += '\n';
        data += text;
        ++lines;
    }
    return std::nullopt;
}

std::vector<Piece> Protocol::pieces_for(MessageKind kind, const std::string& data,
                                        const ModuleVoice& voice) {
    std::vector<Piece> pieces;
    if (kind == MessageKind::Char)
        pieces.push_back({Piece::Kind::Text, data == "space" ? " " : data, 0});
    else if (kind == MessageKind::Key || kind == MessageKind::SoundIcon)
        pieces.push_back({Piece::Kind::Text, key_words(data), 0});
    else
        pieces = parse_message(data);
    const bool spelt = spelling(settings_) && kind == MessageKind::Text;
    // The server sends a punctuation mode other than "none" only when it
    // left the symbols to the module, and a CHAR it did not describe.
    std::optional<SymbolLevel> symbols = punctuation_level(settings_.punctuation_mode);
    if (symbols == SymbolLevel::None) symbols.reset();
    if (kind == MessageKind::Char) symbols = SymbolLevel::Char;
    if (kind != MessageKind::Text && kind != MessageKind::Char) symbols.reset();
    for (auto& p : pieces) {
        if (p.kind != Piece::Kind::Text) continue;
        if (symbols) p.text = symbols_.speak(p.text, voice.language, *symbols);
        if (spelt) p.text = spell_out(p.text);
        if ((spelt || kind == MessageKind::Char) && settings_.cap_let_recogn == "spell")
            p.text = announce_capitals(p.text);
    }
    return pieces;
}

bool Protocol::speak(MessageKind kind) {
    out_.send("202 OK RECEIVING MESSAGE\n");
    std::size_t lines = 0;
    bool too_large = false;
    const auto data = read_data(lines, too_large);
    if (!data) return false;
    if (too_large || data->empty() || !ensure_engine()) {
        out_.send("301 ERROR CANT SPEAK\n");
        return true;
    }
    // Refused whole with the words the engine uses everywhere, rather than
    // spoken with holes the listener cannot know about.
    if (auto bad = utf8::find_bad_sequence(*data)) {
        log_line(1, "message not spoken: text is not valid UTF-8 (" + utf8::describe(*bad) + ")");
        out_.send("301 ERROR CANT SPEAK\n");
        return true;
    }
    if (kind != MessageKind::Text && lines > 1) {
        out_.send("305 DATA MORE THAN ONE LINE\n");
        return true;
    }
    SpeechJob job;
    if (kind == MessageKind::SoundIcon)
        job.icon = load_sound_icon(config_.sound_icon_folder, *data);
    const ModuleVoice& voice = choose_voice(settings_, *voices_);
    if (!job.icon) job.pieces = pieces_for(kind, *data, voice);
    // A capital letter alone (as announce_capitals() finds one) gets its cue.
    job.capital_cue = kind == MessageKind::Char && settings_.cap_let_recogn == "icon" &&
                      data->size() == 1 && (*data)[0] >= 'A' && (*data)[0] <= 'Z';
    job.options = stream_options(settings_, voice, config_.backend);
    job.prosody = base_prosody(settings_, voice);
    job.gain = output_gain(settings_);
    // The server waits for a message's ending before it sends the next
    // one. A SPEAK that comes earlier is refused and the message goes on,
    // as the reference modules refuse it (module_process.c answers 301
    // when the module is speaking); no event comes between this command
    // and its reply. After the ending, the stream may still be going away.
    if (speaker_->speaking()) {
        log_line(2, "SPEAK while a message is being spoken: refused (301)");
        out_.send("301 ERROR CANT SPEAK\n");
        return true;
    }
    speaker_->wait_idle();
    std::lock_guard lock(out_.mutex());
    speaker_->start_locked(std::move(job));
    out_.send_locked("200 OK SPEAKING\n");
    return true;
}

}  // namespace etude::speechd
