#include "engine/streams/sentence_accumulator.h"

#include "engine/streams/text_input.h"

namespace etude::engine {

namespace {

// A sentence can only end where white space follows a terminator (or a
// closing quote or bracket) or at a blank line, so a piece without white
// space cannot complete one; skipping the scan then keeps a stream of tiny
// pieces from scanning the held sentence once per piece.
bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

SentenceAccumulator::SentenceAccumulator(std::size_t max_sentence_bytes)
    : max_bytes_(max_sentence_bytes) {}

std::vector<std::string> SentenceAccumulator::add(std::string_view piece) {
    held_.append(piece);
    const std::size_t held_before = held_.size();
    bool may_end = false;
    for (char c : piece) may_end = may_end || is_space(c);
    std::vector<std::string> done;
    if (may_end) {
        const std::size_t end = last_final_sentence_end(held_, scanned_);
        if (end > 0) {
            done.emplace_back(held_, 0, end);
            held_.erase(0, end);
        }
        scanned_ = no_sentence_end_before(held_);
    }
    // A sentence past the limit: its leading pieces are final already. Each
    // goes out alone: split again together they could fit the limit and
    // stay whole.
    while (max_bytes_ > 0 && held_.size() > max_bytes_) {
        const std::size_t cut = long_sentence_cut(held_, max_bytes_);
        done.emplace_back(held_, 0, cut);
        held_.erase(0, cut);
        scanned_ = scanned_ > cut ? scanned_ - cut : 0;
    }
    // Released text took the held text's start with it: look at what is
    // left (the run after the last end, or the rest of a cut sentence);
    // otherwise only the new piece can add something to speak.
    holds_speech_ = held_.size() != held_before ? has_speakable_text(held_)
                                                : holds_speech_ || has_speakable_text(piece);
    return done;
}

std::string SentenceAccumulator::finish() {
    std::string rest;
    rest.swap(held_);
    scanned_ = 0;
    holds_speech_ = false;
    return rest;
}

void SentenceAccumulator::clear() {
    held_.clear();
    scanned_ = 0;
    holds_speech_ = false;
}

}  // namespace etude::engine
