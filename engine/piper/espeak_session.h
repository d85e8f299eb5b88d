// espeak-ng, which keeps its state (voice, dictionaries, the read-ahead
// character) in globals: one owner for the whole process. Every call takes
// one mutex; espeak-ng is initialised on first use and terminated when the
// process exits. Built without espeak-ng (ETUDE_WITH_ESPEAK=OFF), every call
// throws etude::Error saying so.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/piper/clause_terminator.h"

namespace etude::piper {

// One clause as espeak-ng phonemised it.
struct EspeakClause {
    std::string phonemes;  // IPA, UTF-8, language-switch flags such as "(en)" still in
    ClauseTerminator terminator;
    std::size_t text_begin = 0;  // the clause's bytes in the text given
    std::size_t text_end = 0;
};

class EspeakSession {
  public:
    // False in a build without espeak-ng.
    static bool available();
    // Where espeak-ng reads its data: an espeak-ng-data folder (with
    // phontab), used instead of espeak-ng's own search. Process-wide; once
    // espeak-ng has started only the same folder is accepted. Throws
    // etude::Error naming the folder otherwise.
    static void set_data_folder(const std::string& folder);
    // "espeak-ng 1.51", or why there is none.
    static std::string version();
    static bool voice_exists(const std::string& voice);
    // IPA phonemes clause by clause, with each clause's terminator. The text
    // must be valid UTF-8 without NUL bytes. Throws etude::Error when
    // espeak-ng cannot start or has no such voice.
    static std::vector<EspeakClause> phonemize(const std::string& voice, std::string_view text);
};

}  // namespace etude::piper
