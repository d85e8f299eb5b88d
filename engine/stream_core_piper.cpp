// What only a Piper stream's StreamCore does: its intake (text phonemized
// on the caller's thread, or phoneme ids), the analysis of a sentence to
// its prior on an engine worker, and the producer's side, which streams the
// flow and decodes the latent chunk by chunk.
#include <algorithm>
#include <exception>
#include <utility>

#include "engine/engine_workers.h"
#include "engine/piper/sentence_words.h"
#include "engine/stream_core.h"

namespace etude::engine {

// A Piper voice's front end finds the sentences and their phonemes here,
// on the caller's thread (espeak-ng takes a few milliseconds a sentence);
// the engine's workers run the network's text-to-latent part. A long text
// goes paragraph by paragraph (at blank lines, which no sentence crosses),
// each queued as soon as it is phonemized, so a chapter starts playing
// after its first paragraph rather than after all of it.
std::size_t StreamCore::push_piper_text(std::string_view text) {
    const auto pushed = Clock::now();
    std::size_t n = 0;
    while (!text.empty()) {
        std::size_t end = text.find("\n\n");
        end = end == std::string_view::npos ? text.size() : end + 2;
        std::vector<Sentence> sentences;
        const bool words = report_words_.load(std::memory_order_relaxed);
        for (auto& p : piper_->phonemize(text.substr(0, end), words)) {
            Sentence s;
            s.prosody = input_prosody_;
            s.phoneme_ids = std::move(p.ids.ids);
            s.words_wanted = words;
            // A sentence with written words none of which could be paired.
            s.words_paired = !words || !p.words.empty() || piper::written_words(p.text).empty();
            s.words = std::move(p.words);
            sentences.push_back(std::move(s));
        }
        const std::size_t count = sentences.size();
        queue_phoneme_ids(std::move(sentences), pushed, n > 0);
        n += count;
        text.remove_prefix(end);
    }
    return n;
}

void StreamCore::push_phoneme_ids(std::span<const std::int64_t> ids) {
    if (!piper_)
        throw Error(
            "push_phoneme_ids needs a Piper stream: create it with "
            "StreamOptions::piper_voice set");
    if (ids.empty()) throw Error(piper_->name() + ": no phoneme ids to speak");
    const auto pushed = Clock::now();
    std::vector<std::int64_t> copy(ids.begin(), ids.end());
    piper_->check_ids(copy);
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    std::vector<Sentence> one(1);
    one[0].phoneme_ids = std::move(copy);  // no text, so no words
    queue_phoneme_ids(std::move(one), pushed);
}

// `pushed`: when the caller handed the text over (first audio counts from
// there, the front end included); `continuing`: more of the same push,
// whose first audio was counted already.
void StreamCore::queue_phoneme_ids(std::vector<Sentence> sentences, Clock::time_point pushed,
                                   bool continuing) {
    if (sentences.empty()) return;
    {
        std::lock_guard lock(mu_);
        const auto gen = ring_.generation();
        bool first = !continuing && outstanding_ == markers_waiting_;
        for (auto& s : sentences) {
            s.origin = {gen, pushed, first, s.prosody.volume};
            text_queue_.push_back(std::move(s));
            first = false;
        }
        outstanding_ += sentences.size();
        sentences_queued_ += sentences.size();
    }
    engine_->wake();
}

// A Piper sentence's ids to its prior: the text encoder, the durations
// and the prior's own generator, seeded from this stream's noise. One
// engine worker at a time does this for the stream (analysing_), in the
// order the sentences were pushed, so the noise is drawn in that order and
// a seed reproduces the audio.
void StreamCore::analyse_piper(Sentence sentence) {
    const auto t0 = Clock::now();
    std::optional<WorkItem> item;
    std::string refusal;
    try {
        // The prior's sampling, the flow and (staged) the later durations
        // run on the producer, after the sentence's first audio
        // (vocode_latent).
        // SSML's rate divides the pace; a Piper voice has no pitch control.
        auto scales = piper_scales_;
        scales.length_scale /= sentence.prosody.rate;
        VitsPrior prior = piper_->network().text_to_latent().prior(
            sentence.phoneme_ids, piper_speaker_, scales, piper_noise_, PriorDurations::Staged);
        if (prior.frames() > 0 || !prior.complete()) {
            auto l = std::make_shared<LatentSentence>();
            l->z.assign(std::size_t(prior.channels()) * std::size_t(prior.frames()), 0.0f);
            l->prior = std::move(prior);
            l->origin = sentence.origin;
            l->words = std::move(sentence.words);
            l->words_paired = sentence.words_paired;
            l->words_wanted = sentence.words_wanted;
            item = std::move(l);
        }
    } catch (const std::exception& e) {
        // Refused ids or durations past the limit (etude::Error), or no
        // memory: this sentence is counted as unspeakable, and why is kept
        // for stats(); the stream and the shared worker go on.
        item.reset();
        refusal = e.what();
    }
    finish_analysis(t0, sentence.origin, std::move(item), std::move(refusal));
}

// A Piper sentence, chunk by chunk: the flow and the decoder both stream
// with exact context (each frame through each once), and each chunk's
// audio goes out as soon as it is made, so first audio waits for the flow's
// first block (the chunk and the flow's 32 frames of look-ahead) and one
// chunk, not for the sentence. The
// last chunk ends the utterance at the sentence's end, as Piper's model
// calls do.
bool StreamCore::vocode_latent(LatentSentence& s) {
    std::vector<float> chunk;
    piper_flow_->reset();
    // Its audio starts where the ring's writing is now (the sentence before
    // it is written whole); each word's marks go in before the chunk it is
    // heard in.
    PiperWords words{ring_.write_position()};
    if (s.words_wanted && !s.words_paired) words_unpaired_.add();
    // The first push also covers the frames the decoder must see beyond its
    // first chunk before it makes any audio, so first audio waits for one
    // flow push, not two.
    const auto flow_until = [&](int first, int count) {
        return first == 0 ? count + mel_->right_context_frames() : first + count;
    };
    for (int first = 0;; first += latent_chunk_frames_) {
        // A staged prior (analyse_piper) has its first durations only; the
        // rest are made here, after the sentence's first audio, once the
        // flow's push for this chunk (which covers the chunk) would reach
        // the known frames' end.
        if (piper_flow_->needs_complete_prior(s.prior, flow_until(first, latent_chunk_frames_))) {
            try {
                complete_prior(s.prior, s.z, s.flowed);
            } catch (const std::exception& e) {
                // Durations past the frame limit (etude::Error), or no
                // memory: the rest of the sentence is unspeakable.
                mel_->reset();
                note_unspeakable(e.what());
                return false;
            }
        }
        const int frames = s.prior.frames();
        if (first >= frames) break;
        const int count = std::min(latent_chunk_frames_, frames - first);
        if (ring_.cancelled(s.origin.generation)) {
            mel_->reset();
            return false;
        }
        if (first + count > s.flowed) {
            const int until = flow_until(first, count);
            try {
                s.flowed = piper_flow_->run_until(s.prior, until, s.z);
            } catch (const std::exception&) {
                mel_->reset();  // a device error in the flow: the sentence is dropped
                return false;
            }
        }
        // (Completed above whenever this chunk could reach the known end, so
        // `frames` still holds.)
        plan_piper_words(s, first + count, words);
        copy_mel_frames(s.z, s.prior.channels(), frames, first, count, chunk);
        const bool last = s.prior.complete() && first + count == frames;
        if (!vocode_frames(chunk, count, last, s.origin)) return false;
    }
    return true;
}

// A word is heard after the frames of the ids before its first: each id
// lasts its duration in frames of `hop` samples of the voice's rate. Only
// durations already made are read; the flow has been completed as far as
// the chunk ending at `until` needs. The marks go in as the audio does
// (mark_words_before), since a chunk's audio can come out later.
void StreamCore::plan_piper_words(const LatentSentence& s, int until, PiperWords& w) {
    if (!s.words_wanted) return;
    const std::vector<int>& durations = s.prior.durations();
    const double samples_per_frame = double(piper_->hop()) * rate_ / piper_->sample_rate();
    while (w.next < s.words.size()) {
        const WordStart& word = s.words[w.next];
        if (word.start > durations.size()) return;
        for (; w.id < word.start; ++w.id) w.frames += durations[w.id];
        if (w.frames >= until) return;
        plan_word(word.text, w.start, double(w.frames) * samples_per_frame, s.origin.generation);
        ++w.next;
    }
}

}  // namespace etude::engine
