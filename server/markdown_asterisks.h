// Markdown's asterisks, dropped before a Wyoming request is spoken, as
// wyoming-piper drops them (its sentence splitter's remove_asterisks, per
// sentence): "*word*" and "**some words**" are spoken as the words, and an
// asterisk run left unpaired at the start of a line or sentence (a list's
// bullet) goes. A language model's replies, which Home Assistant streams
// to its TTS, are full of them, and a voice reads each as "asterisk". An
// asterisk elsewhere without a pair in its sentence ("5 * 3") stays.
//
// Streamed text is followed piece by piece: an asterisk run that may open
// a pair is held, with the words after it, until its pair comes (the words
// go on without the asterisks), its sentence or line ends (it goes on as
// it came, bar a bullet), or the text does. Held text is bounded
// (kMostHeld) so that a lone asterisk never holds a long sentence back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace etude::server {

class MarkdownAsterisks {
  public:
    // A run held longer than this many bytes goes on as it came.
    static constexpr std::size_t kMostHeld = 512;

    // What of the text so far, with `piece` after it, may be spoken now.
    std::string pass(std::string_view piece);
    // The rest, once the text has ended.
    std::string finish();
    // The whole text at once (pass() and finish()).
    static std::string removed(std::string_view text);

  private:
    enum class State { Text, Opening, Inside, Closing };
    // The held run and words go on unpaired: without the run where it
    // opened a line or sentence, else as they came.
    void release(std::string& out);
    void take(char c, std::string& out);

    State state_ = State::Text;
    std::string held_;      // an opening asterisk run and the words after it
    std::size_t run_ = 0;   // the run's asterisks (the start of held_)
    bool at_start_ = true;  // only white space since a line's or sentence's start
    bool run_at_start_ = false;
    bool after_end_mark_ = false;  // the last character was . ! or ?
};

}  // namespace etude::server
