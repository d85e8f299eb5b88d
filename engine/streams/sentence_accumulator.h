// Text arriving in pieces cut anywhere (a language model's tokens, a
// Wyoming synthesize-chunk stream, even inside a word or a UTF-8
// sequence), released as text whose sentences are the sentences of the
// whole: each release is a run of complete sentences (and, for a sentence
// over the length limit, its leading pieces), which split_sentences splits
// exactly as it splits the same stretch of the whole text. The rest is held
// until more text proves it complete, or finish().
//
// Why it is exact: split_sentences decides a sentence end from the text up
// to it and the character right after it, so an end followed by more text
// is final (last_final_sentence_end). A sentence over the limit is cut from
// its front at places that depend on its first limit + 1 bytes only
// (long_sentence_cut), so those pieces are final before the sentence ends.
//
// Cost: each add() scans only the held text it has not ruled out yet (the
// new piece and the run of terminators, closers and white space before it),
// and only when the new piece could complete a sentence (white space in
// it), so a long unfinished sentence pushed in tiny pieces costs linear
// time, even without a limit.
//
// Threads: none of its own; its owner serialises calls.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace etude::engine {

class SentenceAccumulator {
  public:
    // `max_sentence_bytes`: split_sentences' limit (the Flite path cuts
    // longer sentences); 0: no limit (Piper's front end splits sentences
    // itself, so a long one is held whole).
    explicit SentenceAccumulator(std::size_t max_sentence_bytes = 400);

    // Adds a piece; returns the text it completed, as stretches to split
    // one by one (none when nothing was completed): a run of whole
    // sentences, then each leading piece of an over-long sentence.
    std::vector<std::string> add(std::string_view piece);
    // The end of the text: everything held.
    std::string finish();
    // Drops what is held (a cancel).
    void clear();
    // The text held back.
    std::string_view held() const { return held_; }
    // The held text has something to speak (has_speakable_text(held())),
    // kept up to date as pieces come, so asking costs nothing however long
    // the held sentence grows.
    bool holds_speech() const { return holds_speech_; }

  private:
    std::size_t max_bytes_;
    std::string held_;         // from the start of an unfinished sentence (or its uncut rest)
    std::size_t scanned_ = 0;  // held_ has no sentence end before this
    bool holds_speech_ = false;
};

}  // namespace etude::engine
