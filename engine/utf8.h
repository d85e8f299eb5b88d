/// \file
/// UTF-8 as LibEtude reads and writes it: one strict decoder and one encoder
/// for every layer that touches text (the engine's text input and SSML
/// reader, the Piper front end) and every way in (the speech-dispatcher
/// module, the CLI). What one refuses, all refuse, with the same words.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

/// Strict UTF-8: exactly the well-formed byte sequences of the Unicode
/// Standard (chapter 3.9, Table 3-7), nothing else.
namespace etude::utf8 {

/// What is wrong with a byte sequence, or None when it is well-formed.
enum class Problem {
    None,               ///< a well-formed character
    StrayContinuation,  ///< a continuation byte (0x80..0xBF) where a character should begin
    Overlong,           ///< a longer form than the value needs (C0, C1; E0 80..9F; F0 80..8F)
    Surrogate,          ///< a UTF-16 surrogate, U+D800..U+DFFF (ED A0..BF)
    AboveUnicode,       ///< a value above U+10FFFF (F4 90..BF; F5..F7)
    NotUtf8Byte,        ///< 0xF8..0xFF: bytes that UTF-8 never uses
    CutShort,  ///< a character whose continuation bytes stop early: a byte that is not one follows
    EndsInside,  ///< the text ends inside a character whose bytes so far are well-formed
};

/// One character read from UTF-8 text, or what is wrong where it should be.
struct Decoded {
    char32_t value = 0;  ///< the scalar value; 0 when `problem` is not None
    /// The character's length in bytes (1..4). With a problem: the bytes
    /// that still begin a well-formed sequence (Unicode's "maximal subpart",
    /// at least 1), so a reader that skips them resumes where a character
    /// may start.
    std::size_t bytes = 1;
    Problem problem = Problem::None;  ///< None for a well-formed character
    /// True for a well-formed character.
    bool ok() const noexcept { return problem == Problem::None; }
};

/// The character that begins at `text[offset]` (offset < text.size()).
Decoded decode_at(std::string_view text, std::size_t offset) noexcept;

/// Where text stops being UTF-8, and why.
struct BadSequence {
    std::size_t offset = 0;           ///< the byte where the bad sequence begins
    Problem problem = Problem::None;  ///< what is wrong there (never None)
};

/// The first ill-formed sequence of `text`, or nullopt if it is all UTF-8.
std::optional<BadSequence> find_bad_sequence(std::string_view text) noexcept;

/// What `problem` means, in words ("an overlong form").
std::string_view describe(Problem problem) noexcept;

/// Where and what, for an error message: "at byte offset 3: a character cut
/// short". Every caller puts it after its own "... is not valid UTF-8".
std::string describe(const BadSequence& bad);

/// True for a Unicode scalar value: up to U+10FFFF and not a surrogate.
bool is_scalar_value(char32_t value) noexcept;

/// The scalar values of `text`; throws etude::Error ("text is not valid
/// UTF-8 (at byte offset N: ...)") at the first ill-formed sequence.
std::u32string decode(std::string_view text);

/// Appends `value`'s UTF-8 (1..4 bytes) to `out`; throws etude::Error for a
/// value that is no scalar value (a surrogate, or above U+10FFFF).
void append(std::string& out, char32_t value);

/// `value` as UTF-8; throws etude::Error as append() does.
std::string encode(char32_t value);

/// `values` as UTF-8; throws etude::Error as append() does.
std::string encode(std::u32string_view values);

/// The largest offset <= `offset` that is not a continuation byte of
/// `text`, or 0: where a cut at `offset` must move to so that no character
/// is split. `offset` may be text.size() (returned as it is).
std::size_t char_start_at_or_before(std::string_view text, std::size_t offset) noexcept;

/// The bytes at the end of `text` that begin a character and do not finish
/// it, while well-formed so far (0..3): a piece of text cut inside a
/// character, whose next piece may complete it.
std::size_t unfinished_tail(std::string_view text) noexcept;

}  // namespace etude::utf8
