/// \file
/// SSML as the engine takes it (Stream::push_ssml, `etude say --ssml`, the
/// speech-dispatcher module): text to speak, silences (`<break>`) and marks,
/// in document order. expat parses it; see parse_message() for what is kept
/// and what is spoken as plain text. Public API: a front end that speaks a
/// message piece by piece (the speech-dispatcher module) reads it here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/ssml_prosody.h"

namespace etude::engine {

/// One piece of a message, in document order.
struct Piece {
    /// What the piece is.
    enum class Kind {
        Text,     ///< text to speak
        Silence,  ///< a `<break>`
        Mark      ///< a `<mark name="..."/>`
    };
    Kind kind = Kind::Text;  ///< which of the three
    std::string text;        ///< Text: plain text to speak; Mark: the mark's name
    int silence_ms = 0;      ///< Silence: its length
    Prosody prosody;         ///< Text: the `<prosody>` elements around it, multiplied
};

/// The pieces of `message`. speech-dispatcher sends SSML (a `<speak>`
/// document with `<mark name="__spd_N"/>` marks), but after a resume it may
/// be a fragment with unbalanced tags, and in its SSML mode anything a
/// client wrote. So: expat parses it (as is, then wrapped in `<speak>`); when
/// neither is well-formed XML, a lenient scanner keeps the marks and breaks,
/// drops every other tag and decodes the common entities. Never throws for
/// bad input. Adjacent text is merged; `<say-as interpret-as="characters">`
/// (or "spell-out") text is spelt; `<prosody>` sets each text piece's
/// Prosody (neighbouring text merges only where it is the same); other
/// elements (voice, emphasis, audio, ...) keep their text and lose their
/// meaning. The lenient scanner ignores `<prosody>`.
std::vector<Piece> parse_message(std::string_view message);

/// `text` with every character separated by a space ("abc" -> "a b c"), so
/// that the front end names letters instead of reading a word; white space
/// is dropped.
std::string spell_out(std::string_view text);

}  // namespace etude::engine
