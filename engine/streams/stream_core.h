// One stream's insides, behind the Stream facade: its intake (push_text,
// push_ssml, push_mel, cancel), the queue between the engine's workers and
// its producer thread, and the producer loop. What differs between a
// built-in voice, a Piper voice and a mel stream (splitting text, analysing
// a sentence, speaking a work item) is its StreamVoice's (stream_voice.h);
// everything else is here once. Audio goes into the PlaybackRing, which the
// consumer reads, and marks and word starts into the mark queue beside it.
//
// Threads: the public calls from any non-real-time thread, except pull()
// (the audio callback, real-time) and read() (one offline consumer). The
// take_/analyse/render_ahead calls come from the engine's workers.
// mu_ guards the queues and slow statistics; pull() never takes it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduling/block_records.h"
#include "engine/scheduling/deadline.h"
#include "engine/scheduling/step_pool.h"
#include "engine/streams/idle_memory.h"
#include "engine/streams/playback_ring.h"
#include "engine/streams/sentence_accumulator.h"
#include "engine/streams/work_items.h"
#include "engine/voices/piper_voice.h"
#include "engine/voices/stream_voice.h"
#include "rt/counters.h"

namespace etude::engine {

class EngineWorkers;

class StreamCore final : public VoiceSink, public std::enable_shared_from_this<StreamCore> {
  public:
    // `piper`: the Piper voice of a Piper stream (PiperVoiceOptions::piper_voice), else null.
    StreamCore(std::shared_ptr<EngineWorkers> engine, const FliteVoice& voice,
               std::shared_ptr<const PiperVoice> piper, StreamOptions options);
    ~StreamCore() override;
    // Starts the producer thread (after the stream is fully built).
    void start();

    // ---- any thread -------------------------------------------------------
    std::size_t mel_bands() const;
    void push_mel(std::span<const float> mel, std::size_t frames, bool last);
    std::size_t push_text(std::string_view text);
    std::size_t push_ssml(std::string_view document);
    void push_mark(std::string_view name);
    void set_stream_prosody(const Prosody& prosody);
    void push_break(double ms);
    std::size_t end_input();
    void push_phoneme_ids(std::span<const std::int64_t> ids);
    void set_voice(std::string_view name);
    void cancel();
    bool busy() const;
    double latency_ms() const;
    StreamStats stats() const;
    std::vector<BlockRecord> block_records(std::size_t max) const { return records_.records(max); }
    void write_trace(const std::string& path) const;
    const std::string& voice_name() const { return voice_->name(); }
    const StreamOptions& options() const { return options_; }

    // ---- consumers --------------------------------------------------------
    std::size_t pull(std::span<float> out) noexcept { return ring_.pull(out); }
    bool next_mark(SpeechMark& mark) noexcept;
    std::uint64_t position() const noexcept { return ring_.read_position(); }
    void report_words(bool on) noexcept { report_words_.store(on, std::memory_order_relaxed); }
    std::size_t read(std::span<float> out);
    std::size_t read_some(std::span<float> out, int timeout_ms);
    // Stream::set_audio_listener(): called where readers are woken.
    void set_audio_listener(std::function<void()> listener);

    // ---- engine workers (called with the engine's lock held for take_*) ----
    // When the sentence take_sentence() would give is due (deadline.h, the
    // order across streams), in steady-clock nanoseconds; nothing if none.
    std::optional<DeadlineGate::Due> sentence_deadline() const;
    std::optional<Sentence> take_sentence();
    // StreamVoice::analyses_one_at_a_time(), of this stream's voice.
    bool analyses_one_at_a_time() const { return voice_->analyses_one_at_a_time(); }
    // Whether engine render workers may make its sentences ahead
    // (StreamVoice::renders_ahead()).
    bool renders_ahead() const { return voice_->renders_ahead(); }
    void analyse(Sentence sentence);
    std::shared_ptr<AnalysedSentence> take_render_job();
    void render_ahead(const std::shared_ptr<AnalysedSentence>& s);

    // ---- VoiceSink (producer thread) --------------------------------------
    bool wait_for_room(std::size_t samples, std::uint64_t generation) override;
    bool write(std::span<const float> samples, const ItemOrigin& origin, bool last_chunk) override;
    bool cancelled(std::uint64_t generation) const override { return ring_.cancelled(generation); }
    bool shutting_down() override;
    void plan_word(std::string_view text, std::uint64_t start, double offset,
                   std::uint64_t generation) override;
    void note_unspeakable(std::string reason) override;
    void note_words_unpaired() override { words_unpaired_.add(); }
    DeadlineGate::Turn wait_turn(const ItemOrigin& origin) override;
    bool read_offline() const override {
        return producer_background_ || options_.scheduling == SchedulingClass::Offline ||
               (stepped_ && offline_reader_.load(std::memory_order_relaxed));
    }

  private:
    void produce();
    // ---- the producer as steps on the engine's pool (stream_core_steps.cpp) --
    // A network stream whose voice steps on a pool (StreamVoice::
    // steps_on_a_pool()) has no producer thread: each of these does what
    // one turn of produce()'s loop, or one step of an item, does, and
    // never waits but for a turn at the gate.
    // `ready_ns`: since when the pool has had it ready (its unit's turn was
    // asked for then: wait_turn()); `taken_ns`: when a pool thread took it.
    StepNext produce_step(std::int64_t ready_ns, std::int64_t taken_ns);
    // Its next unit's due for the pool's order, as wait_turn() gives it
    // (the pool thread's, mu_ held).
    WorkDue producer_due() const;
    // Tells the producer there may be work: its condition, or the pool.
    void wake_producer();
    // What a stepped write could not put in the ring, first (false while
    // some is still held); an item whose audio it held finishes once it is in.
    bool write_held_audio();
    // write_held_audio(), and if some is still held, the stream waits for
    // room (waiting_for_room_ up, with no wake lost): true then.
    bool held_audio_stays();
    // When a stream waiting for room looks again: soon for a real-time
    // reader, which cannot wake it.
    StepNext look_for_room() const;
    // A reader has made room: whether the stepped producer waits for it
    // (the reader's side of held_audio_stays()'s fence).
    bool room_awaited() const {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return waiting_for_room_.load(std::memory_order_relaxed);
    }
    // A marker's part of a step: its mark, or its silence as far as the
    // ring takes it. True once all of it is spoken (`ok`: not cancelled).
    bool speak_marker_step(const SpeechMarker& marker, bool& ok);
    // A cancel the producer has not yet acknowledged, acknowledged: the
    // voice drops what it was at and read() waits no longer (mu_ held).
    // True when there was one.
    bool acknowledge_cancel();
    // The queue's next item taken for speaking (mu_ held): its audio counts
    // as the item being spoken from here (sentence_deadline()).
    WorkItem take_next_item();
    // What of `samples` fits goes into the ring now (a final chunk only
    // whole: the speech's end is published before it); how much, or
    // nothing when its speech was cancelled.
    std::optional<std::size_t> write_what_fits(std::span<const float> samples,
                                               const ItemOrigin& origin, bool last_chunk);
    // read() without the offline-reader check.
    std::size_t read_audio(std::span<float> out);
    // take_sentence() would give one (mu_ held).
    bool sentence_ready() const;
    // How far the stream's audio reaches at ring position `end` (deadline.h):
    // on its listener's clock if `started`, else from `pushed` (mu_ held).
    StreamHorizon horizon(bool started, Clock::time_point pushed, std::uint64_t end) const;
    // A marker's silence, or the voice's estimate (StreamVoice::estimated_samples).
    std::uint64_t estimated_samples(const WorkItem& item) const;
    // Throws etude::Error naming `what` when the stream takes mel frames.
    void require_text(const char* what) const;
    // Queues text the input released: its voice splits it into sentences.
    std::size_t queue_text(const std::vector<std::string>& stretches);
    // Queues sentences of one push (`pushed`: when the caller handed it
    // over; `continuing`: more of a push whose first sentence was queued).
    // `spaced`: sentences of text, which PiperVoiceOptions::sentence_silence_ms
    // separates (input lock held); false for push_phoneme_ids().
    void queue_sentences(std::vector<Sentence> sentences, Clock::time_point pushed, bool continuing,
                         const Prosody& prosody, bool spaced);
    // push_text() with the input lock held and the UTF-8 checked.
    std::size_t add_text(std::string_view text);
    // Queues a mark or break after the held text, which it ends (input lock held).
    std::size_t queue_marker(std::string mark, std::size_t silence_samples);
    // Queues a marker (its origin set) in order with the sentences (mu_ held).
    void push_marker(std::shared_ptr<SpeechMarker> marker);
    // The held text queued as complete (input lock held); the caller drops
    // holding_ once what follows it is queued too.
    std::size_t queue_held_text();
    // Text pushed from here on is spoken with `prosody` (input lock held).
    std::size_t set_prosody(const Prosody& prosody);
    // Throws etude::Error when the last push ended inside a UTF-8 character,
    // which `what` (a mark, a break, prosody) would split (input lock held).
    void refuse_split_character(const char* what) const;
    // The producer's side of a marker: the mark recorded, or the silence written.
    bool speak_marker(const SpeechMarker& marker);
    // Queues a mark for next_mark() at ring position `sample`.
    void record_mark(std::string_view name, SpeechMark::Kind kind, std::uint64_t sample,
                     std::uint64_t generation);
    // The pending words that start before ring position `end`, as marks.
    void mark_words_before(std::uint64_t end);
    // A render worker may be making `u` ahead: the producer takes it over,
    // or waits for its audio (with mu_ held in `lock`). False at shutdown.
    bool claim(AnalysedSentence& u, std::unique_lock<std::mutex>& lock);
    // `refusal`: why the network refused the sentence (no item), if it did.
    void finish_analysis(Clock::time_point started, const ItemOrigin& origin,
                         std::optional<WorkItem> item, std::string refusal = {});
    // `sentence`: the item was a sentence (not a mark or break) for the counts.
    void finish_item(bool complete, double vocoder_seconds, bool sentence = true);
    void mark_end_if_last(std::size_t final_chunk);
    void note_first_audio(const ItemOrigin& origin);

    LiveStreamMark live_;  // first: let go after all else, to give the memory back
    std::shared_ptr<EngineWorkers> engine_;
    const StreamOptions options_;
    double slow_analysis_ms_ = 0;  // StreamOptions::faults: slow-analysis (fault_plan.h)
    double slow_split_ms_ = 0;     // and slow-split
    const double rate_;

    // The text input: pieces in, complete sentences out (push_text()). Its
    // mutex is held while a push queues what it released, so pushes from
    // several threads keep their order; taken before mu_, never inside it.
    std::mutex input_mu_;
    SentenceAccumulator input_;
    std::string utf8_tail_;             // a character the last piece began and did not end
    std::atomic<bool> holding_{false};  // the held text has something to speak
    Prosody input_prosody_;             // SSML <prosody> of the text being pushed
    Prosody base_prosody_;              // set_stream_prosody(): push_ssml's is within it
    // PiperVoiceOptions::sentence_silence_ms in output samples, and whether a
    // sentence of this input was queued (the next gets the silence first).
    std::size_t sentence_silence_samples_ = 0;
    bool sentence_before_ = false;

    mutable std::mutex mu_;  // guards queues and slow statistics; never taken by pull()
    std::condition_variable work_cv_, space_cv_, data_cv_;
    // Wakes the readers: data_cv_'s waiters and the audio listener (an
    // event loop's reader, which never waits in read_some()).
    void notify_readers();
    std::mutex listener_mu_;  // held while the listener runs, and to change it
    std::function<void()> audio_listener_;
    std::deque<Sentence> text_queue_;
    std::deque<WorkItem> queue_;   // the voice's work items and markers, in order
    bool producer_busy_ = false;   // the producer is speaking an item
    std::size_t outstanding_ = 0;  // items queued and not yet fully written or dropped
    // Marks and breaks among them not yet taken by the producer: a push
    // into a stream that holds only these still starts its first audio.
    std::size_t markers_waiting_ = 0;
    bool analysing_ = false;
    // The producer is making the first audio of a push and the voice holds
    // the next analysis back meanwhile (a Piper voice: the prior of
    // sentence two would take the cores the flow and decoder of sentence
    // one need before anything is heard; take_sentence()).
    bool first_audio_due_ = false;
    bool shutdown_ = false;
    // shutdown_, readable without mu_: a producer waiting for its turn
    // checks it under the gate's lock (deadline_gate.h).
    std::atomic<bool> closing_{false};
    bool mel_open_ = false;  // a mel utterance has begun and not ended
    // The listener's clock of the order across streams (deadline.h): it
    // starts at the first audio of a push into an idle stream, at ring
    // position listener_start_pos_. Queued items' estimated samples, and
    // where the item being spoken is expected to end, give how far ahead
    // of it the stream's audio reaches.
    bool listening_ = false;
    Clock::time_point listener_start_;
    std::uint64_t listener_start_pos_ = 0, queued_samples_ = 0, current_end_pos_ = 0;
    std::uint64_t sentences_queued_ = 0, cancels_ = 0, sentences_unspeakable_ = 0;
    std::string unspeakable_reason_;
    double first_audio_ms_ = -1.0, frontend_seconds_ = 0.0, vocoder_seconds_ = 0.0;
    rt::Counter sentences_spoken_, sentences_dropped_, frames_rendered_ahead_;

    PlaybackRing ring_;
    // Marks reached, for next_mark(): the producer writes, the consumer reads.
    struct MarkRecord {
        std::uint64_t generation = 0;  // the cancel count of its speech
        SpeechMark mark;
    };
    rt::SpscRing<MarkRecord> marks_{1024};
    rt::Counter marks_reached_, marks_dropped_, words_unpaired_;
    std::atomic<bool> report_words_{false};
    std::vector<float> volume_scratch_;  // producer thread: audio with its SSML volume
    // Producer thread: the current item's words not yet reached by the audio
    // written, in order; a mark each as its audio goes in, dropped with the
    // item if it ends first (cancelled, or failed), so no mark names a word
    // that was not spoken.
    std::deque<MarkRecord> pending_words_;
    // Into the queue next_mark() reads, counted as reached or dropped.
    void queue_mark(const MarkRecord& mark);
    BlockRecorder records_;
    std::unique_ptr<StreamVoice> voice_;          // after the ring and records it writes through
    std::atomic<bool> producer_realtime_{false};  // the OS granted SCHED_FIFO to the producer
    // read() has been called: nobody listens in real time, so the producer
    // gives up SCHED_FIFO at its next item (the order across streams: a
    // reader far ahead must not take the cores from a stream someone hears).
    std::atomic<bool> offline_reader_{false};

    // Producer-thread state.
    bool first_audio_pending_ = false;
    bool producer_background_ = false;  // stepped down for an offline reader
    std::thread producer_;

    // The last cancel the producer acknowledged (its thread's, or the
    // pool thread stepping it).
    std::uint64_t seen_generation_ = 0;
    // A stepped producer's state between its steps (pool threads, one at a
    // time), in place of produce()'s locals.
    bool stepped_ = false;
    std::int64_t step_ready_ns_ = 0, step_taken_ns_ = 0;
    std::optional<WorkItem> step_item_;  // the item being spoken
    double step_compute_seconds_ = 0.0;
    std::size_t marker_left_ = 0;  // of the marker's silence
    bool marker_started_ = false;
    // Audio a step wrote that the ring had no room for (a stepped write
    // never waits), and the finish of the item it ends, held until it is in.
    std::vector<float> held_audio_;
    ItemOrigin held_origin_;
    bool held_last_ = false;
    struct HeldFinish {
        bool complete = false;
        double seconds = 0.0;
        bool sentence = true;
    };
    std::optional<HeldFinish> held_finish_;
    bool held_dropped_ = false;  // held audio dropped by a cancel: its item is not complete
    std::atomic<bool> waiting_for_room_{false};  // a reader's read wakes the pool
    StepPool::Member step_member_;               // last: leaves the pool (in ~StreamCore) first
};

}  // namespace etude::engine
