// wyoming-piper's --auto-punctuation: text whose last character is none of
// the given ones is spoken with the first of them after it, so a request
// without a final full stop still ends as a statement does (a Piper voice
// reads the punctuation: without it the last words keep a rising pitch).
// The mark goes right after the last character, before any white space
// that ends the text: after a blank line it would be a sentence of its own,
// which says nothing. Streamed text is followed piece by piece.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace etude::server {

// wyoming-piper's default: full stops, question and exclamation marks of
// several scripts.
inline constexpr std::string_view kDefaultEndPunctuation = ".?!。？！．؟";

class EndPunctuation {
  public:
    // `chars`: UTF-8, each character one mark; "" turns the addition off.
    // Throws std::invalid_argument if `chars` is not valid UTF-8.
    explicit EndPunctuation(std::string_view chars = kDefaultEndPunctuation);

    // `text` with the mark it lacks, if it lacks one, after its last
    // character (white space at its end dropped, as wyoming-piper strips it).
    std::string completed(std::string_view text) const;
    // The mark `text` lacks, or "" (text of white space alone lacks none).
    std::string missing_after(std::string_view text) const;

    // Text arriving in pieces: pass() each on, then add finish() at the end.
    // White space that ends the text so far while it lacks its mark is held
    // back (and passed on before the next character), so that the mark
    // finish() gives still comes right after the last character.
    class Follower {
      public:
        explicit Follower(const EndPunctuation& rule) : rule_(&rule) {}
        std::string pass(std::string_view piece);
        std::string finish() const { return rule_->missing_after(tail_); }

      private:
        const EndPunctuation* rule_;
        std::string tail_;  // the text's last few bytes before its trailing white space
        std::string held_;  // that white space (and a character cut), while the text lacks its mark
    };

  private:
    std::vector<std::string> marks_;
};

}  // namespace etude::server
