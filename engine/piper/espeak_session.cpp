#include "engine/piper/espeak_session.h"

#include "engine/error.h"
#include "engine/piper/espeak_text_guard.h"
#include "engine/piper/unicode_text.h"

#ifdef ETUDE_WITH_ESPEAK
#include <espeak-ng/speak_lib.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#endif

namespace etude::piper {

#ifdef ETUDE_WITH_ESPEAK
namespace {

// The data folder set_data_folder() named; empty: espeak-ng's own search.
// Read once, by EspeakOwner's constructor, which marks it taken: from then
// on the data espeak-ng runs on cannot change.
struct DataFolderChoice {
    std::mutex mutex;
    std::string folder;
    bool taken = false;

    static DataFolderChoice& get() {
        static DataFolderChoice choice;
        return choice;
    }
};

// The process's espeak-ng. Started on first use (under the mutex of the
// function-local static), espeak_Terminate at exit. A start that failed is
// not tried again: each try has espeak-ng print its own error (a missing
// phontab) to stderr, once per voice loaded, while every try would fail
// the same way.
class EspeakOwner {
  public:
    static EspeakOwner& get() {
        static EspeakOwner owner;
        if (!owner.started_)
            throw Error(owner.folder_.empty()
                            ? "espeak-ng could not start (is its data installed? ESPEAK_DATA_PATH)"
                            : "espeak-ng could not start on its data in " + owner.folder_);
        return owner;
    }
    std::mutex mutex;

    // Call with the mutex held.
    void select_voice(const std::string& voice) {
        if (voice == voice_) return;
        if (espeak_SetVoiceByName(voice.c_str()) != EE_OK) {
            voice_.clear();
            throw Error("espeak-ng has no voice '" + voice + "' (list them: espeak-ng --voices)");
        }
        voice_ = voice;
    }
    const std::string& version() const { return version_; }

  private:
    EspeakOwner() {
        DataFolderChoice& choice = DataFolderChoice::get();
        {
            std::lock_guard lock(choice.mutex);
            choice.taken = true;
            folder_ = choice.folder;
        }
        // Synchronous and silent: we only ask for phonemes. DONT_EXIT: a
        // missing data folder must be an error, not the end of the process.
        // No folder (nullptr): espeak-ng searches ESPEAK_DATA_PATH, then
        // ~/espeak-ng-data, then the folder built into it.
        const int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0,
                                           folder_.empty() ? nullptr : folder_.c_str(),
                                           espeakINITIALIZE_DONT_EXIT);
        started_ = rate > 0;
        if (!started_) return;
        const char* path = nullptr;
        version_ = std::string("espeak-ng ") + espeak_Info(&path);
    }
    ~EspeakOwner() {
        if (started_) espeak_Terminate();
    }
    bool started_ = false;
    std::string folder_;  // the data folder named, or empty
    std::string voice_;
    std::string version_;
};

}  // namespace

bool EspeakSession::available() {
    return true;
}

void EspeakSession::set_data_folder(const std::string& folder) {
    // espeak-ng takes a folder that is not there for "search elsewhere", so
    // a wrong one would silently fall back to another copy of the data.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(std::filesystem::path(folder) / "phontab", ec))
        throw Error(folder + ": not an espeak-ng-data folder (expected phontab in it)");
    DataFolderChoice& choice = DataFolderChoice::get();
    std::lock_guard lock(choice.mutex);
    if (choice.taken && folder != choice.folder)
        throw Error(
            "espeak-ng has already started on " +
            (choice.folder.empty() ? std::string("the data it found itself") : choice.folder) +
            "; name its data folder before the first Piper voice loads (" + folder + ")");
    choice.folder = folder;
}

std::string EspeakSession::version() {
    EspeakOwner& owner = EspeakOwner::get();
    std::lock_guard lock(owner.mutex);
    return owner.version();
}

bool EspeakSession::voice_exists(const std::string& voice) {
    EspeakOwner& owner = EspeakOwner::get();
    std::lock_guard lock(owner.mutex);
    try {
        owner.select_voice(voice);
        return true;
    } catch (const Error&) {
        return false;
    }
}

std::vector<EspeakClause> EspeakSession::phonemize(const std::string& voice,
                                                   std::string_view text) {
    if (text.find('\0') != std::string_view::npos)
        throw Error("text holds a NUL byte; espeak-ng reads C strings");
    // NUL-terminated for espeak, without what espeak-ng 1.51 mishandles
    // (espeak_text_guard.h); clause positions are mapped back to `text` at
    // the end.
    std::vector<std::size_t> spaces;
    const std::string owned = guard_espeak_text(text, voice, spaces);
    EspeakOwner& owner = EspeakOwner::get();
    std::lock_guard lock(owner.mutex);
    owner.select_voice(voice);
    std::vector<EspeakClause> clauses;
    const char* const start = owned.c_str();
    const void* cursor = start;
    std::size_t clause_begin = 0;
    while (cursor) {
        const char* before = static_cast<const char*>(cursor);
        const char* ipa = espeak_TextToPhonemes(&cursor, espeakCHARS_AUTO, espeakPHONEMES_IPA);
        const std::size_t consumed_end =
            cursor ? static_cast<std::size_t>(static_cast<const char*>(cursor) - start)
                   : owned.size();
        const std::size_t consumed_begin = static_cast<std::size_t>(before - start);
        // espeak-ng always moves on (to the end, then nullptr); were it ever
        // to stop, this loop would never end: an error, not a hang.
        if (cursor && (consumed_end <= consumed_begin || consumed_end > owned.size()))
            throw Error("espeak-ng stopped advancing through the text at byte " +
                        std::to_string(consumed_begin));
        EspeakClause c;
        c.phonemes = ipa ? ipa : "";
        c.terminator = recover_clause_terminator(
            std::string_view(owned).substr(consumed_begin, consumed_end - consumed_begin),
            cursor == nullptr);
        // espeak read one character of this clause with the previous call.
        c.text_begin = clause_begin;
        c.text_end = std::max(clause_begin, consumed_begin + c.terminator.clause_bytes);
        clause_begin = c.text_end;
        clauses.push_back(std::move(c));
    }
    if (!spaces.empty())
        for (EspeakClause& c : clauses) {
            c.text_begin = original_offset(c.text_begin, spaces);
            c.text_end = original_offset(c.text_end, spaces);
        }
    return clauses;
}

#else  // built without espeak-ng

namespace {
[[noreturn]] void refuse() {
    throw Error(
        "this build has no espeak-ng (ETUDE_WITH_ESPEAK=OFF, it is GPL-3.0), so Piper voices "
        "cannot turn text into phonemes; give phoneme ids instead (--json-input "
        "{\"phoneme_ids\": [...]})");
}
}  // namespace

bool EspeakSession::available() {
    return false;
}
void EspeakSession::set_data_folder(const std::string&) {
    refuse();
}
std::string EspeakSession::version() {
    return "none (built with ETUDE_WITH_ESPEAK=OFF)";
}
bool EspeakSession::voice_exists(const std::string&) {
    refuse();
}
std::vector<EspeakClause> EspeakSession::phonemize(const std::string&, std::string_view) {
    refuse();
}

#endif

}  // namespace etude::piper
