// wyoming-piper's --auto-punctuation: text whose last character is none of
// the given ones is spoken with the first of them after it, so a request
// without a final full stop still ends as a statement does (a Piper voice
// reads the punctuation: without it the last words keep a rising pitch).
// Streamed text is followed piece by piece, and only its end counts.
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

    // What to add after `text` ("" for text with no character but white
    // space, or ending in one of the marks).
    std::string missing_after(std::string_view text) const;

    // The same for text arriving in pieces: feed() each, then missing().
    class Follower {
      public:
        explicit Follower(const EndPunctuation& rule) : rule_(&rule) {}
        void feed(std::string_view piece);
        std::string missing() const { return rule_->missing_after(tail_); }

      private:
        const EndPunctuation* rule_;
        std::string tail_;  // the text's last few bytes, trailing white space dropped
    };

  private:
    std::vector<std::string> marks_;
};

}  // namespace etude::server
