// Streaming text in, complete sentences out: the text of a Wyoming
// synthesize-chunk stream (or any stream of pieces cut anywhere, even inside
// a word or a UTF-8 sequence) becomes the same sentences that
// engine::split_sentences makes of the whole text, each released as soon as
// the text after it proves it complete. So a streamed reply is spoken
// exactly as the same text given at once.
//
// Why it is exact: split_sentences decides a sentence end from the text up
// to it and the character right after it; an end it finds in a prefix of
// the text is an end in the whole text too, except at the very end of the
// prefix. So every sentence of a prefix but its last is final, and the last
// is held back until more text or finish().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etude::server {

class SentenceAccumulator {
  public:
    // Adds a piece; returns the sentences it completed, in order.
    std::vector<std::string> add(std::string_view piece);
    // The end of the text: the sentences still held.
    std::vector<std::string> finish();
    // Bytes received so far.
    std::size_t size() const { return text_.size(); }

  private:
    std::vector<std::string> release(bool all);

    std::string text_;          // everything received (bounded by the server's text limit)
    std::size_t released_ = 0;  // sentences already handed out
    std::size_t split_at_ = 0;  // text_.size() at the last split
};

}  // namespace etude::server
