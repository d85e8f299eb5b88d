#include "engine/stream_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "engine/deadline.h"
#include "engine/engine_workers.h"
#include "engine/fault_plan.h"
#include "engine/text_input.h"
#include "engine/utterance_renderer.h"
#include "rt/monotonic_clock.h"
#include "rt/realtime_thread.h"

namespace etude::engine {
namespace {

// Sentences analysed ahead of the one being spoken: enough to keep the
// vocoder and the render workers fed, few enough that a long text costs
// memory for only a few.
constexpr std::size_t kLookaheadSentences = 3;
// How often a producer blocked on a full ring rechecks it: a real-time
// reader never signals (it must not), so the writer polls.
constexpr auto kSpacePoll = std::chrono::milliseconds(1);
// The most latent frames a Piper stream decodes at once (about 0.37 s at
// 22050 Hz): a larger latency budget gains nothing from larger chunks.
constexpr int kMaxLatentChunkFrames = 32;

// "20", "0.05": a number as a person wrote it, for messages.
std::string format_number(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

StreamCore::StreamCore(std::shared_ptr<EngineWorkers> engine, const FliteVoice& voice,
                       std::shared_ptr<const PiperVoice> piper, StreamOptions options)
    : engine_(std::move(engine)),
      voice_(&voice),
      options_(std::move(options)),
      rate_(options_.sample_rate),
      ring_(rate_, static_cast<std::size_t>(rate_ * options_.latency_ms / 1000.0),
            options_.cancel_fade_ms) {
    // A built-in voice's pace is Flite's duration stretch; bounded, since
    // every frame it asks for is made and kept until spoken.
    if (!piper && options_.length_scale &&
        !(std::isfinite(*options_.length_scale) && *options_.length_scale >= 0.1f &&
          *options_.length_scale <= 10.0f))
        throw Error(voice.name() + ": length_scale must be from 0.1 to 10, not " +
                    format_number(*options_.length_scale));
    const FaultSpec faults = faults_for_stream(options_.faults);
    blocks_ =
        std::make_unique<BlockScheduler>(*engine_, options_, faults, voice, ring_, *this, records_);
    if (piper) {
        piper_ = std::move(piper);
        piper_speaker_ = piper_->speaker_id(options_.speaker);
        piper_scales_ =
            piper_->scales(options_.noise_scale, options_.length_scale, options_.noise_w);
        piper_noise_.seed(options_.seed);
        piper_flow_ = piper_->network().open_flow(piper_speaker_);
        // Half the latency budget per chunk: a chunk is decoded well before
        // the audio ahead of it has played, and first audio waits for one.
        const double frame_ms = 1000.0 * piper_->hop() / piper_->sample_rate();
        latent_chunk_frames_ = std::clamp(static_cast<int>(options_.latency_ms / 2.0 / frame_ms), 1,
                                          kMaxLatentChunkFrames);
    }
    if (!options_.model.empty() || piper_) {
        MelSchedulerOptions m;
        m.model_path = options_.model;
        m.cpu_model_path = options_.cpu_model;
        if (piper_) {
            m.load_model = [voice = piper_, speaker = piper_speaker_](auto backend) {
                return voice->load_decoder(speaker, std::move(backend));
            };
            m.label = "VITS (" + piper_->model_path() + ")";
        }
        m.backend = options_.backend;
        m.device = options_.device;
        m.output_rate = rate_;
        if (faults.device) m.gpu_fault = *faults.device;
        // Phase reconstruction needs a mel; a Piper decoder takes the VITS latent.
        m.allow_phase_fallback = options_.allow_phase_fallback && !piper_;
        mel_ = std::make_unique<MelScheduler>(m);
    }
}

void StreamCore::start() {
    producer_ = std::thread([this] {
        // The producer is on every block's critical path (it waits for the
        // result, commits it, resamples it and writes the ring), so it runs
        // at the block processors' priority: left at normal priority behind a
        // CPU-bound load it was held back long enough for the ring to run dry
        // with every block computed in time (BlockScheduler.slow_primary_...:
        // 6 of 15 runs failed with both cores loaded, 0 of 15 after). Mel
        // streams run their networks on this thread and stay normal. Piper
        // streams run their decoder here too, but a live Piper stream has
        // nothing else to cover a late chunk: at normal priority behind two
        // busy loops, a JACK client underran 211 times in 8 s of speech (the
        // CPU backend's OpenMP team, made by this thread, inherits its
        // priority too). The ring bounds how far ahead it works, so it
        // sleeps once it is ahead.
        if (options_.realtime_workers && (!mel_ || piper_))
            rt::make_current_thread_realtime(kProcessorPriority);
        produce();
    });
    if (options_.wait_for_device) blocks_->wait_for_device();
}

StreamCore::~StreamCore() {
    {
        std::lock_guard lock(mu_);
        shutdown_ = true;
    }
    work_cv_.notify_all();
    space_cv_.notify_all();
    data_cv_.notify_all();
    blocks_->stop();
    if (producer_.joinable()) producer_.join();
}

std::size_t StreamCore::mel_bands() const {
    return mel_ && !piper_ ? static_cast<std::size_t>(mel_->audio().n_mels) : 0;
}

void StreamCore::push_mel(std::span<const float> mel, std::size_t frames, bool last) {
    if (!mel_ || piper_)
        throw Error("push_mel needs a mel stream: create it with StreamOptions::model set");
    const std::size_t n_mels = static_cast<std::size_t>(mel_->audio().n_mels);
    if (mel.size() != frames * n_mels)
        throw Error("push_mel: " + std::to_string(mel.size()) + " values is not " +
                    std::to_string(n_mels) + " mels x " + std::to_string(frames) + " frames");
    for (float v : mel)
        if (!std::isfinite(v)) throw Error("push_mel: the chunk holds a value that is not finite");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    if (frames == 0 && !last) return;
    auto c = std::make_shared<MelChunk>();
    c->mel.assign(mel.begin(), mel.end());
    c->frames = frames;
    c->last = last;
    c->origin.pushed = Clock::now();
    {
        std::lock_guard lock(mu_);
        c->origin.generation = ring_.generation();
        c->origin.first_of_push = outstanding_ == 0;
        mel_open_ = !last;
        queue_.push_back(std::move(c));
        ++outstanding_;
        ++sentences_queued_;
    }
    work_cv_.notify_all();
}

std::size_t StreamCore::push_text(std::string_view text) {
    if (mel_ && !piper_)
        throw Error("this stream vocodes mel frames (StreamOptions::model); use push_mel");
    if (auto bad = find_invalid_utf8(text))
        throw Error("text is not valid UTF-8 (bad byte at offset " + std::to_string(*bad) + ")");
    if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
    if (piper_) return push_piper_text(text);
    auto pieces = split_sentences(text);
    if (pieces.empty()) return 0;
    const auto now = Clock::now();
    {
        std::lock_guard lock(mu_);
        const auto gen = ring_.generation();
        // First-audio latency is measured from a push into an idle stream.
        bool first = outstanding_ == 0;
        for (auto& p : pieces) {
            text_queue_.push_back({std::move(p), next_voice_, {gen, now, first}});
            first = false;
        }
        outstanding_ += pieces.size();
        sentences_queued_ += pieces.size();
    }
    engine_->wake();
    return pieces.size();
}

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
        std::vector<std::vector<std::int64_t>> sentences;
        for (auto& s : piper_->phonemize(text.substr(0, end)))
            sentences.push_back(std::move(s.ids.ids));
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
    std::vector<std::vector<std::int64_t>> one;
    one.push_back(std::move(copy));
    queue_phoneme_ids(std::move(one), pushed);
}

// `pushed`: when the caller handed the text over (first audio counts from
// there, the front end included); `continuing`: more of the same push,
// whose first audio was counted already.
void StreamCore::queue_phoneme_ids(std::vector<std::vector<std::int64_t>> sentences,
                                   Clock::time_point pushed, bool continuing) {
    if (sentences.empty()) return;
    {
        std::lock_guard lock(mu_);
        const auto gen = ring_.generation();
        bool first = !continuing && outstanding_ == 0;
        for (auto& ids : sentences) {
            Sentence s;
            s.origin = {gen, pushed, first};
            s.phoneme_ids = std::move(ids);
            text_queue_.push_back(std::move(s));
            first = false;
        }
        outstanding_ += sentences.size();
        sentences_queued_ += sentences.size();
    }
    engine_->wake();
}

void StreamCore::set_voice(std::string_view name) {
    if (piper_)
        throw Error("a Piper stream speaks its one voice (" + piper_->name() +
                    "); create another stream for another voice");
    const FliteVoice& v = FliteVoice::load(name);
    std::lock_guard lock(mu_);
    next_voice_ = &v;
}

void StreamCore::cancel() {
    std::size_t dropped;
    {
        std::lock_guard lock(mu_);
        dropped = text_queue_.size() + queue_.size();
        outstanding_ -= dropped;
        text_queue_.clear();
        queue_.clear();
        mel_open_ = false;  // the next push_mel starts a new utterance
        ring_.cancel();
        ++cancels_;
    }
    sentences_dropped_.add(dropped);
    work_cv_.notify_all();
    space_cv_.notify_all();
    data_cv_.notify_all();
}

bool StreamCore::busy() const {
    std::lock_guard lock(mu_);
    // An open mel utterance (its `last` chunk not yet pushed) is unfinished work.
    return outstanding_ > 0 || mel_open_ || ring_.read_available() > 0;
}

double StreamCore::latency_ms() const {
    return static_cast<double>(ring_.effective_latency_samples()) * 1000.0 / rate_;
}

StreamStats StreamCore::stats() const {
    StreamStats s;
    s.samples_delivered = ring_.delivered();
    s.underruns = ring_.underruns();
    s.underrun_samples = ring_.underrun_samples();
    s.sentences_spoken = sentences_spoken_.get();
    s.sentences_dropped = sentences_dropped_.get();
    s.frames_vocoded = frames_rendered_ahead_.get();
    s.latency_ms = latency_ms();
    s.vocoder = piper_ ? "vits" : mel_ ? "neural" : blocks_->spectral() ? "spectral" : "mlsa";
    blocks_->fill_stats(s);
    if (mel_) {
        const auto m = mel_->stats();
        s.model = m.model;
        s.mel_frames = m.frames;
        s.mel_chunks_gpu = m.chunks[0];
        s.mel_chunks_cpu = m.chunks[1];
        s.mel_chunks_phase = m.chunks[2];
        s.model_latency_ms = m.latency_ms;
        s.gpu_device = m.gpu_device;
        s.gpu_note = m.gpu_note;
        s.gpu_failures = m.gpu_failures;
        s.gpu_disabled = m.gpu_disabled;
        s.gpu_last_error = m.gpu_last_error;
    }
    records_.fill_stats(s);
    std::lock_guard lock(mu_);
    s.sentences_queued = sentences_queued_;
    s.cancels = cancels_;
    s.sentences_unspeakable = sentences_unspeakable_;
    s.unspeakable_reason = unspeakable_reason_;
    s.first_audio_ms = first_audio_ms_;
    s.frontend_seconds = frontend_seconds_;
    s.vocoder_seconds = vocoder_seconds_;
    return s;
}

void StreamCore::write_trace(const std::string& path) const {
    write_chrome_trace(path, records_.records(BlockRecorder::kCapacity), blocks_->kernel_timings());
}

// ---- offline consumer -------------------------------------------------------

std::size_t StreamCore::read(std::span<float> out) {
    std::size_t got = 0;
    while (got < out.size()) {
        if (ring_.cancel_pending()) {
            const std::size_t n = ring_.pull_cancelled(out.subspan(got));
            got += n;
            if (n == 0 && ring_.cancel_pending()) {
                // Wait for the producer to acknowledge the cancel (it does
                // once its current chunk or block is done) instead of
                // spinning: a server's synthesis threads spun here at full
                // CPU while their producers waited for a core.
                std::unique_lock lock(mu_);
                data_cv_.wait_for(lock, std::chrono::milliseconds(50),
                                  [&] { return ring_.cancel_acknowledged() || shutdown_; });
                if (shutdown_) break;
            }
            continue;
        }
        const std::size_t n = ring_.read_audio(out.subspan(got));
        got += n;
        if (n > 0) {
            space_cv_.notify_one();
            continue;
        }
        std::unique_lock lock(mu_);
        data_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] {
            return ring_.read_available() > 0 || (outstanding_ == 0 && !mel_open_) || shutdown_;
        });
        if (ring_.read_available() == 0 && ((outstanding_ == 0 && !mel_open_) || shutdown_)) break;
    }
    return got;
}

// ---- engine workers ---------------------------------------------------------

// Takes the next sentence to analyse if this stream has room for more
// look-ahead. Called with the engine's lock held, never this stream's.
std::optional<Sentence> StreamCore::take_sentence() {
    std::lock_guard lock(mu_);
    if (shutdown_ || text_queue_.empty() || analysing_ || first_audio_due_ ||
        queue_.size() >= kLookaheadSentences)
        return std::nullopt;
    Sentence s = std::move(text_queue_.front());
    text_queue_.pop_front();
    analysing_ = true;
    return s;
}

void StreamCore::analyse(Sentence sentence) {
    if (piper_) return analyse_piper(std::move(sentence));
    const auto t0 = Clock::now();
    AcousticFrames frames;
    try {
        frames = sentence.voice->analyse(sentence.text, options_.length_scale.value_or(1.0f));
    } catch (const Error&) {
        frames = AcousticFrames{};  // counted as dropped below
    }
    std::optional<WorkItem> item;
    if (frames.frames > 1) {  // else only symbols Flite skips, or a front-end error
        auto u = std::make_shared<AnalysedSentence>();
        u->frames = std::move(frames);
        u->voice = sentence.voice;
        u->origin = sentence.origin;
        item = std::move(u);
    }
    finish_analysis(t0, sentence.origin, std::move(item));
}

// The front end is done with a sentence: its work item is queued, or, with
// nothing to say or cancelled while being analysed, it is settled here as
// dropped (cancel() counts only the queued sentences).
void StreamCore::finish_analysis(Clock::time_point started, const ItemOrigin& origin,
                                 std::optional<WorkItem> item, std::string refusal) {
    {
        std::lock_guard lock(mu_);
        analysing_ = false;
        frontend_seconds_ += seconds_since(started);
        const bool current = !ring_.cancelled(origin.generation);
        if (current && item) {
            queue_.push_back(std::move(*item));
        } else {
            --outstanding_;
            sentences_dropped_.add();
            if (current) {
                ++sentences_unspeakable_;
                if (!refusal.empty()) unspeakable_reason_ = std::move(refusal);
            }
        }
    }
    work_cv_.notify_all();
    data_cv_.notify_all();
    engine_->wake();  // a render worker or the next analysis may start
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
        VitsPrior prior = piper_->network().text_to_latent().prior(
            sentence.phoneme_ids, piper_speaker_, piper_scales_, piper_noise_,
            PriorDurations::Staged);
        if (prior.frames() > 0 || !prior.complete()) {
            auto l = std::make_shared<LatentSentence>();
            l->z.assign(std::size_t(prior.channels()) * std::size_t(prior.frames()), 0.0f);
            l->prior = std::move(prior);
            l->origin = sentence.origin;
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

// Claims an analysed sentence that is not about to be scheduled by this
// stream's own producer (that one goes block by block, for the lowest
// latency). Called with the engine's lock held.
std::shared_ptr<AnalysedSentence> StreamCore::take_render_job() {
    std::lock_guard lock(mu_);
    // Spectral streams give every block to the scheduler (and the GPU).
    if (shutdown_ || !options_.render_ahead || blocks_->spectral()) return nullptr;
    // While the producer is idle it will take the head itself.
    for (std::size_t i = producer_busy_ ? 0 : 1; i < queue_.size(); ++i) {
        auto* s = std::get_if<std::shared_ptr<AnalysedSentence>>(&queue_[i]);
        if (s && (*s)->state == AnalysedSentence::Pending) {
            (*s)->state = AnalysedSentence::WorkerRendering;
            return *s;
        }
    }
    return nullptr;
}

void StreamCore::render_ahead(const std::shared_ptr<AnalysedSentence>& u) {
    const auto t0 = Clock::now();
    const auto start_ns = rt::now_ns();
    UtteranceRenderer renderer(*u->voice, rate_);
    std::vector<float> audio;
    audio.reserve(static_cast<std::size_t>(static_cast<double>(u->frames.frames) *
                                           u->voice->vocoder_config().frame_period * rate_ /
                                           u->voice->sample_rate()) +
                  1024);
    const bool done = renderer.render(u->frames, [&](std::span<const float> chunk, bool) {
        audio.insert(audio.end(), chunk.begin(), chunk.end());
        return !ring_.cancelled(u->origin.generation) &&
               !u->taken_over.load(std::memory_order_relaxed);
    });
    bool kept = false;
    {
        std::lock_guard lock(mu_);
        kept = u->state == AnalysedSentence::WorkerRendering;  // not taken over
        if (kept) {
            u->audio = std::move(audio);
            u->render_started_ns = start_ns;
            u->render_finished_ns = rt::now_ns();
            u->state = done ? AnalysedSentence::Rendered : AnalysedSentence::Abandoned;
        }
        vocoder_seconds_ += seconds_since(t0);
    }
    if (done && kept) frames_rendered_ahead_.add(u->frames.frames);
    work_cv_.notify_all();
}

// ---- producer thread --------------------------------------------------------

void StreamCore::produce() {
    // From the last cancel acknowledged, not the ring's generation now: a
    // cancel() that came before this thread first ran (a server cancels a
    // stream it has just opened when its client is already gone) must still
    // be acknowledged, or read() waits for that forever.
    std::uint64_t seen_generation = ring_.acknowledged_generation();
    for (;;) {
        std::unique_lock lock(mu_);
        producer_busy_ = false;
        work_cv_.wait(lock, [&] {
            return shutdown_ || !queue_.empty() || ring_.generation() != seen_generation;
        });
        if (shutdown_) return;
        const auto gen = ring_.generation();
        if (gen != seen_generation) {
            seen_generation = gen;
            if (mel_) mel_->reset();
            ring_.acknowledge(gen);
            data_cv_.notify_all();  // an offline reader waits for this (read())
            continue;
        }
        WorkItem item = std::move(queue_.front());
        queue_.pop_front();
        producer_busy_ = true;
        if (auto* chunk = std::get_if<std::shared_ptr<MelChunk>>(&item)) {
            lock.unlock();
            first_audio_pending_ = first_audio_pending_ || (*chunk)->origin.first_of_push;
            mel_compute_ns_ = 0;
            const bool complete = vocode_mel(**chunk);
            finish_item(complete, static_cast<double>(mel_compute_ns_) / 1e9);
            continue;
        }
        if (auto* latent = std::get_if<std::shared_ptr<LatentSentence>>(&item)) {
            first_audio_due_ = (*latent)->origin.first_of_push;
            lock.unlock();
            engine_->wake();  // room for the next sentence's latent
            first_audio_pending_ = true;
            mel_compute_ns_ = 0;
            const bool complete = vocode_latent(**latent);
            finish_item(complete, static_cast<double>(mel_compute_ns_) / 1e9);
            continue;
        }
        auto u = std::get<std::shared_ptr<AnalysedSentence>>(std::move(item));
        // A sentence a render worker is still making is taken over and
        // scheduled block by block: the producer gets here once the previous
        // sentence is in the ring, so the worker is late, and waiting for it
        // had no deadline and no fallback (with both cores loaded the ring
        // ran dry at the sentence boundary; the workers run at normal
        // priority).
        if (u->state == AnalysedSentence::WorkerRendering)
            u->taken_over.store(true, std::memory_order_relaxed);
        const bool mine =
            u->state == AnalysedSentence::Pending || u->state == AnalysedSentence::WorkerRendering;
        if (mine) u->state = AnalysedSentence::Scheduled;
        if (!mine) {
            // A render worker has finished it (or the cancel came).
            work_cv_.wait(lock, [&] {
                return shutdown_ || u->state == AnalysedSentence::Rendered ||
                       u->state == AnalysedSentence::Abandoned ||
                       ring_.cancelled(u->origin.generation);
            });
            if (shutdown_) return;
        }
        lock.unlock();
        engine_->wake();  // room for more look-ahead
        first_audio_pending_ = true;
        const bool complete = mine ? blocks_->schedule(*u) : blocks_->copy_ahead(*u);
        finish_item(complete, static_cast<double>(blocks_->compute_ns()) / 1e9);
    }
}

// One chunk of a mel stream: the mel scheduler picks the tier by the
// time left before this audio is due and makes the audio.
bool StreamCore::vocode_mel(const MelChunk& c) {
    return vocode_frames(c.mel, static_cast<int>(c.frames), c.last, c.origin);
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
        copy_mel_frames(s.z, s.prior.channels(), frames, first, count, chunk);
        const bool last = s.prior.complete() && first + count == frames;
        if (!vocode_frames(chunk, count, last, s.origin)) return false;
    }
    return true;
}

bool StreamCore::vocode_frames(std::span<const float> frames, int count, bool last,
                               const ItemOrigin& origin) {
    if (ring_.cancelled(origin.generation)) {
        mel_->reset();
        return false;
    }
    // The same deadline as text blocks (deadline.h).
    MelChunkReport report;
    const auto dispatched = rt::now_ns();
    const PlaybackState playback = ring_.playback_state();
    const auto budget_ns = deadline_ns(dispatched, playback) - dispatched;
    std::span<const float> audio;
    try {
        audio = mel_->process(frames, count, last, budget_ns, report, may_reduce_quality(playback));
    } catch (const std::exception&) {
        mel_->reset();  // a device error the CPU could not cover either
        return false;
    }
    mel_compute_ns_ += report.finished_ns - report.started_ns;
    BlockRecord rec;
    rec.index = records_.next_index();
    rec.processor = to_record(report.processor);
    rec.quality = report.quality;
    rec.reduced_tier = report.quality != Quality::Full;
    rec.fell_back = report.fell_back;
    rec.dispatched_ns = dispatched;
    rec.started_ns = report.started_ns;
    rec.finished_ns = report.finished_ns;
    rec.deadline_ns = dispatched + budget_ns;
    records_.record(rec);
    if (report.fell_back) records_.note_fallback();
    if (!last && audio.empty()) return true;
    return write(audio, origin, last);
}

void StreamCore::note_unspeakable(std::string reason) {
    std::lock_guard lock(mu_);
    ++sentences_unspeakable_;
    unspeakable_reason_ = std::move(reason);
}

void StreamCore::finish_item(bool complete, double vocoder_seconds) {
    std::unique_lock lock(mu_);
    vocoder_seconds_ += vocoder_seconds;
    // A sentence that ended without audio (cancelled, or a device error)
    // holds the next analysis back no longer. (wake() after unlocking: the
    // workers take the engine's lock before this stream's.)
    const bool analysis_held = std::exchange(first_audio_due_, false);
    if (complete) {
        --outstanding_;
        sentences_spoken_.add();
    } else if (!shutdown_) {
        --outstanding_;
        sentences_dropped_.add();
    }
    data_cv_.notify_all();
    lock.unlock();
    if (analysis_held) engine_->wake();
}

bool StreamCore::shutting_down() {
    std::lock_guard lock(mu_);
    return shutdown_;
}

bool StreamCore::wait_for_room(std::size_t block_samples, std::uint64_t gen) {
    for (;;) {
        if (ring_.cancelled(gen)) return false;
        const std::size_t fill = ring_.read_available();
        if (fill < std::max<std::size_t>(ring_.effective_latency_samples(), 1) &&
            ring_.write_available() >= block_samples + 16384 / 4)
            return true;
        std::unique_lock lock(mu_);
        if (shutdown_) return false;
        space_cv_.wait_for(lock, kSpacePoll);
    }
}

bool StreamCore::write(std::span<const float> samples, const ItemOrigin& origin, bool last_chunk) {
    for (;;) {
        if (ring_.cancelled(origin.generation)) return false;
        const bool fits = ring_.write_available() >= samples.size();
        if (fits || !last_chunk) {
            if (last_chunk) mark_end_if_last(samples.size());
            const std::size_t n = ring_.write(samples);
            if (n > 0) {
                note_first_audio(origin);
                data_cv_.notify_all();
            }
            samples = samples.subspan(n);
            if (samples.empty()) return true;
        }
        std::unique_lock lock(mu_);
        if (shutdown_) return false;
        space_cv_.wait_for(lock, kSpacePoll);
    }
}

// Before the final chunk of the final queued item goes in, publish where
// speech will end, so that pull() can tell "finished" from "late".
void StreamCore::mark_end_if_last(std::size_t final_chunk) {
    std::lock_guard lock(mu_);
    if (outstanding_ == 1 && text_queue_.empty() && queue_.empty() && !analysing_)
        ring_.mark_end(ring_.write_position() + final_chunk);
}

void StreamCore::note_first_audio(const ItemOrigin& origin) {
    if (first_audio_pending_ && origin.first_of_push) {
        first_audio_pending_ = false;
        bool analysis_held = false;
        {
            std::lock_guard lock(mu_);
            first_audio_ms_ = seconds_since(origin.pushed) * 1000.0;
            analysis_held = std::exchange(first_audio_due_, false);
        }
        if (analysis_held) engine_->wake();  // the next sentence's analysis may start
    }
}

}  // namespace etude::engine
