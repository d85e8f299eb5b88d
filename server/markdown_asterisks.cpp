#include "server/markdown_asterisks.h"

namespace etude::server {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_end_mark(char c) {
    return c == '.' || c == '!' || c == '?';
}

}  // namespace

std::string MarkdownAsterisks::pass(std::string_view piece) {
    std::string out;
    out.reserve(piece.size());
    for (const char c : piece) take(c, out);
    return out;
}

std::string MarkdownAsterisks::finish() {
    std::string out;
    if (state_ == State::Opening || state_ == State::Inside) release(out);
    state_ = State::Text;
    at_start_ = true;
    after_end_mark_ = false;
    return out;
}

std::string MarkdownAsterisks::removed(std::string_view text) {
    MarkdownAsterisks filter;
    std::string out = filter.pass(text);
    out += filter.finish();
    return out;
}

void MarkdownAsterisks::release(std::string& out) {
    // An unpaired run that opened a line or sentence is a bullet (the
    // second of remove_asterisks' patterns): dropped, its words kept.
    out.append(held_, run_at_start_ ? run_ : 0);
    at_start_ = false;
    held_.clear();
    run_ = 0;
    state_ = State::Text;
}

void MarkdownAsterisks::take(char c, std::string& out) {
    // A sentence or line ends at a new line, or at white space after . ! ?;
    // a pair is looked for only within one (as the splitter's sentences).
    const bool boundary = c == '\n' || (is_space(c) && after_end_mark_);
    switch (state_) {
        case State::Opening:
            if (c == '*') {
                held_ += c;
                ++run_;
                return;
            }
            if (boundary) break;  // released below
            state_ = State::Inside;
            held_ += c;
            after_end_mark_ = is_end_mark(c);
            return;
        case State::Inside:
            if (c == '*') {
                // The pair is complete: its words without the asterisks;
                // the closing run's other asterisks go too.
                out.append(held_, run_);
                held_.clear();
                run_ = 0;
                state_ = State::Closing;
                at_start_ = false;
                after_end_mark_ = false;
                return;
            }
            if (boundary) break;
            held_ += c;
            after_end_mark_ = is_end_mark(c);
            if (held_.size() > kMostHeld) {
                run_at_start_ = false;  // too long to be a bullet's either: as it came
                release(out);
            }
            return;
        case State::Closing:
            if (c == '*') return;
            state_ = State::Text;
            break;
        case State::Text:
            break;
    }
    if (state_ == State::Opening || state_ == State::Inside) release(out);
    // Text.
    if (c == '*') {
        state_ = State::Opening;
        held_.assign(1, '*');
        run_ = 1;
        run_at_start_ = at_start_;
        after_end_mark_ = false;
        return;
    }
    out += c;
    if (boundary)
        at_start_ = true;
    else if (!is_space(c))
        at_start_ = false;
    after_end_mark_ = is_end_mark(c);
}

}  // namespace etude::server
