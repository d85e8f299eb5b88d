#include "server/sentence_accumulator.h"

#include "engine/text_input.h"

namespace etude::server {

namespace {

// A sentence end needs white space after a terminator (or a closing quote
// or bracket after one), or a blank line; a split can only release a
// sentence when the new text holds such a place. Splitting only then keeps a
// stream of tiny pieces from costing a split of the whole text each.
bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool may_precede_end(char c) {
    return c == '.' || c == '!' || c == '?' || c == '"' || c == '\'' || c == ')' || c == ']' ||
           c == '}' || c == '\n';
}
// split_sentences cuts a sentence longer than 400 bytes further; new text
// without any sentence end is split every this many bytes, so such a piece
// goes out soon after it is complete (a split costs the text's length).
constexpr std::size_t kSplitEveryBytes = 100;

}  // namespace

std::vector<std::string> SentenceAccumulator::add(std::string_view piece) {
    const std::size_t from = text_.size();
    text_.append(piece);
    bool may_end = text_.size() - split_at_ >= kSplitEveryBytes;
    for (std::size_t i = from == 0 ? 1 : from; i < text_.size() && !may_end; ++i)
        may_end = is_space(text_[i]) && may_precede_end(text_[i - 1]);
    return may_end ? release(false) : std::vector<std::string>{};
}

std::vector<std::string> SentenceAccumulator::finish() {
    return release(true);
}

std::vector<std::string> SentenceAccumulator::release(bool all) {
    split_at_ = text_.size();
    auto sentences = engine::split_sentences(text_);
    const std::size_t final_count =
        all ? sentences.size() : (sentences.empty() ? 0 : sentences.size() - 1);
    std::vector<std::string> out;
    for (std::size_t i = released_; i < final_count; ++i) out.push_back(std::move(sentences[i]));
    if (final_count > released_) released_ = final_count;
    return out;
}

}  // namespace etude::server
