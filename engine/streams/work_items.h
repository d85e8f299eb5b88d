// The work a stream queues between its intake (push_text, push_mel) and its
// producer thread: text waiting for the front end, an analysed sentence
// waiting to be vocoded, a chunk of mel frames waiting for the neural
// vocoder, or a Piper sentence's latent frames waiting for its decoder. Each carries where it came
// from (ItemOrigin), which decides whether a cancel has made it obsolete and when its first audio
// counts.
//
// Threads: created by the intake or a front-end worker, then owned by the
// stream's queue; fields marked "stream mutex" are guarded by it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/models/vits/text_to_latent.h"
#include "engine/ssml_prosody.h"
#include "engine/streams/word_start.h"
#include "engine/voices/flite_voice.h"

namespace etude::engine {

using Clock = std::chrono::steady_clock;

// Where a piece of work came from.
struct ItemOrigin {
    std::uint64_t generation = 0;  // the cancel count when it was pushed
    Clock::time_point pushed;      // when push_text/push_mel took it
    bool first_of_push = false;    // first audio of a push into an idle stream
    float volume = 1.0f;           // its audio's gain (SSML <prosody volume>), applied as written
};

// A sentence of pushed text, before the front end has analysed it. For a
// Piper stream the text has been phonemized already (its own front end
// finds the sentences): what remains is the network's text-to-latent part.
struct SpeechMarker;
struct Sentence {
    std::string text;
    const FliteVoice* voice = nullptr;
    ItemOrigin origin;
    std::vector<std::int64_t> phoneme_ids;  // Piper streams
    std::vector<WordStart> words;           // Piper streams: at their first id's index
    bool words_paired = true;               // Piper streams: false if they could not be
    bool words_wanted = false;              // report_words() was on when it was pushed
    std::shared_ptr<SpeechMarker> marker;   // else: a mark or break passing through in order
    Prosody prosody;                        // SSML <prosody> around it (volume: origin.volume)
    // Piper streams: a long sentence cut (piper::PhonemizedSentence::continued),
    // going on in the next with no sentence silence between.
    bool continued = false;
};

// An analysed sentence. Its audio is made either block by block by the
// stream's BlockScheduler (the sentence being spoken), or ahead of time into
// `audio` by an engine render worker (the sentences after it).
struct AnalysedSentence {
    enum State { Pending, Scheduled, WorkerRendering, Rendered, Abandoned };
    AcousticFrames frames;
    const FliteVoice* voice = nullptr;
    ItemOrigin origin;
    State state = Pending;      // stream mutex
    std::vector<float> audio;   // valid once state == Rendered
    bool words_wanted = false;  // Sentence::words_wanted
    std::int64_t render_started_ns = 0, render_finished_ns = 0;
    // The producer reached this sentence before its render worker finished
    // and makes it itself, block by block; the worker stops and drops its audio.
    std::atomic<bool> taken_over{false};
};

// A chunk of log-mel frames for a mel stream (Stream::push_mel).
struct MelChunk {
    std::vector<float> mel;  // [n_mels][frames]
    std::size_t frames = 0;
    bool last = false;  // ends the utterance: the vocoder flushes its context
    ItemOrigin origin;
};

// A Piper stream's sentence as its network's prior. The producer samples
// the prior and runs the flow on it as far as each chunk needs, and decodes
// the flow's output chunk by chunk through the mel scheduler (the decoder
// is the model of its tiers).
struct LatentSentence {
    VitsPrior prior;  // its frames drawn as the flow asks for them
    // The flow's output, [channels][frames] of the prior, valid for [0, flowed).
    std::vector<float> z;
    int flowed = 0;  // producer thread
    ItemOrigin origin;
    std::vector<WordStart> words;  // at their first id's index (Sentence::words)
    bool words_paired = true;      // false: the front end could not pair them
    bool words_wanted = false;     // Sentence::words_wanted
};

// A mark or a break of SSML input (Stream::push_ssml), kept in order with
// the sentences around it: it travels through the front end's queue as a
// Sentence that carries it, and the producer records the mark at the ring
// position its audio has reached, or writes the break's silence.
struct SpeechMarker {
    std::string mark;                 // the mark's name; empty for a break
    std::size_t silence_samples = 0;  // a break's length
    ItemOrigin origin;
};

// What the producer thread takes off a stream's queue.
using WorkItem = std::variant<std::shared_ptr<AnalysedSentence>, std::shared_ptr<MelChunk>,
                              std::shared_ptr<LatentSentence>, std::shared_ptr<SpeechMarker>>;

}  // namespace etude::engine
