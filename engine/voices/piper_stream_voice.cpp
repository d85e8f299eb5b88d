#include "engine/voices/piper_stream_voice.h"

#include <algorithm>
#include <cassert>
#include <exception>
#include <utility>

#include "engine/piper/sentence_words.h"
#include "engine/scheduling/deadline.h"
#include "engine/scheduling/fault_plan.h"
#include "engine/streams/playback_ring.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {
namespace {

MelSchedulerOptions decoder_options(const std::shared_ptr<const PiperVoice>& voice, int speaker,
                                    const StreamOptions& options, const FaultSpec& faults) {
    MelSchedulerOptions m;
    m.load_model = [voice, speaker](auto backend) {
        return voice->load_decoder(speaker, std::move(backend));
    };
    m.label = "VITS (" + voice->model_path() + ")";
    m.backend = options.backend;
    m.device = options.device;
    m.output_rate = options.sample_rate;
    if (faults.device) m.gpu_fault = *faults.device;
    m.cpu_busy = faults.cpu_busy;
    // Phase reconstruction needs a mel; a Piper decoder takes the VITS latent.
    m.allow_phase_fallback = false;
    return m;
}

}  // namespace

PiperStreamVoice::PiperStreamVoice(std::shared_ptr<const PiperVoice> voice,
                                   const StreamOptions& options, const FaultSpec& faults,
                                   const PlaybackRing& ring, VoiceSink& sink,
                                   BlockRecorder& records)
    : PiperStreamVoice(voice, std::get<PiperVoiceOptions>(options.voice), options, faults, ring,
                       sink, records) {}

PiperStreamVoice::PiperStreamVoice(std::shared_ptr<const PiperVoice> voice,
                                   const PiperVoiceOptions& piper, const StreamOptions& options,
                                   const FaultSpec& faults, const PlaybackRing& ring,
                                   VoiceSink& sink, BlockRecorder& records)
    : PiperStreamVoice(voice, voice->speaker_id(piper.speaker),
                       voice->scales(piper.noise_scale, piper.length_scale, piper.noise_w), options,
                       faults, ring, sink, records) {}

PiperStreamVoice::PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, int speaker,
                                   VitsScales scales, const StreamOptions& options,
                                   const FaultSpec& faults, const PlaybackRing& ring,
                                   VoiceSink& sink, BlockRecorder& records)
    : DecoderVoice(decoder_options(voice, speaker, options, faults), ring, sink, records),
      voice_(std::move(voice)),
      rate_(options.sample_rate),
      speaker_(speaker),
      scales_(scales),
      noise_(std::get<PiperVoiceOptions>(options.voice).seed),
      host_analysis_(faults.host_analysis),
      flow_(voice_->network().open_flow(speaker_)) {
    open_device_flow();
    // Before the first chunk: where the calibration put the decoder.
    analysis_wanted_on_device_ = wants_device_analysis();
    if (analysis_wanted_on_device_) open_device_analysis();
    // Half the latency budget per chunk: a chunk is decoded well before
    // the audio ahead of it has played, and first audio waits for one.
    const double frame_ms = 1000.0 * voice_->hop() / voice_->sample_rate();
    chunk_frames_ =
        std::clamp(static_cast<int>(options.latency_ms / 2.0 / frame_ms), 1, kMaxLatentChunkFrames);
}

// The flow goes where the decoder's GPU tier is (the same device, the same
// breaker). Opening it there may fail (a lost device, no memory, an
// injected fault): the CPU's flow then runs the sentence, the error counts
// against the device as a decoder chunk's would, and the next sentence
// tries again if the breaker allows.
void PiperStreamVoice::open_device_flow() {
    const auto& device = mel_.gpu_backend();
    if (!device) return;
    try {
        device_flow_ = std::make_unique<VitsFlowStream>(voice_->load_flow(speaker_, device));
    } catch (const gpu::DeviceError& e) {
        mel_.gpu_health().record_failure(rt::now_ns(), e.what());
        device->reset_health();
    }
}

// The text analysis goes to the same device, shared per voice and device
// (PiperVoice::load_analysis; the first load reads the voice file again
// for the encoder's feed-forward weights). Opened at creation where the
// decoder's calibration wants the device, else at the first sentence that
// goes there: a device too slow for the decoder gets no copy. A device
// error counts as the flow's does; a voice file that no longer matches
// leaves every sentence of the stream to the host.
void PiperStreamVoice::open_device_analysis() {
    const auto& device = mel_.gpu_backend();
    if (!device || device_analysis_refused_) return;
    try {
        device_analysis_ = voice_->load_analysis(device);
    } catch (const gpu::DeviceError& e) {
        mel_.gpu_health().record_failure(rt::now_ns(),
                                         std::string("VITS text analysis: ") + e.what());
        device->reset_health();
    } catch (const Error&) {
        device_analysis_refused_ = true;
    }
}

// A sentence is analysed on the device where its flow would run (the
// decoder's last choice, so a device too slow for the decoder, such as
// lavapipe for a full-size voice, leaves it on the host) while the
// breaker allows. The device's prior is whole (every duration at once, the
// device being where the work is cheap); the host's is staged. Where the
// device fails, or its durations lie near a tie, the host makes the whole
// sentence from the noise the device did not consume, so its durations and
// prior are exactly the host's.
std::optional<VitsPrior> PiperStreamVoice::device_prior(std::span<const std::int64_t> ids,
                                                        const VitsScales& scales) {
    const auto& device = mel_.gpu_backend();
    if (!device || !analysis_wanted_on_device_.load(std::memory_order_relaxed) ||
        !mel_.gpu_health().may_try(rt::now_ns()))
        return std::nullopt;
    if (!device_analysis_) open_device_analysis();  // not wanted before, or it failed
    if (!device_analysis_) return std::nullopt;
    // The sentence joins other streams' analysed at the same time on the
    // same device (on a GPU, models/vits/text_analysis_network.h); a stream
    // read offline joins only offline readers' (as its flow pushes do:
    // run_flow), as the producer last saw it (start_flow).
    const Batching lane = analysis_read_offline_.load(std::memory_order_relaxed)
                              ? Batching::JoinOffline
                              : Batching::Join;
    auto r = device_analysis_->prior(voice_->network().text_to_latent(), ids, speaker_, scales,
                                     noise_, lane);
    switch (r.outcome) {
        case VitsAnalysisNetwork::Outcome::OnDevice:
            mel_.gpu_health().record_success();
            ++analyses_gpu_;
            if (r.batch > 1) ++analyses_batched_;
            return std::move(r.prior);
        case VitsAnalysisNetwork::Outcome::NearTie:
            ++analyses_near_tie_;
            return std::nullopt;
        case VitsAnalysisNetwork::Outcome::DeviceError:
            // One line, in the breaker (gpu_last_error); the device is tried
            // again as it allows, the flow's and the decoder's errors alike.
            mel_.gpu_health().record_failure(rt::now_ns(), "VITS text analysis: " + r.error);
            device->reset_health();
            return std::nullopt;
    }
    return std::nullopt;
}

// A drill's host-analysis (fault_plan.h) keeps every analysis on the host.
bool PiperStreamVoice::wants_device_analysis() const {
    return mel_.gpu_backend() && mel_.last_chunk_chose_gpu() && !host_analysis_;
}

// The sentences and their phonemes are found here, on the caller's thread
// (espeak-ng takes a few milliseconds a sentence); the engine's workers run
// the network's text-to-latent part. A long text goes paragraph by
// paragraph (at blank lines, which no sentence crosses), each queued as
// soon as it is phonemized, so a chapter starts playing after its first
// paragraph rather than after all of it.
void PiperStreamVoice::split(std::string_view text, bool words, const QueueSentences& queue) {
    bool continuing = false;  // a paragraph before queued sentences
    while (!text.empty()) {
        std::size_t end = text.find("\n\n");
        end = end == std::string_view::npos ? text.size() : end + 2;
        std::vector<Sentence> sentences;
        for (auto& p : voice_->phonemize(text.substr(0, end), words)) {
            Sentence s;
            s.phoneme_ids = std::move(p.ids.ids);
            s.words_wanted = words;
            // A sentence with written words none of which could be paired.
            s.words_paired = !words || !p.words.empty() || piper::written_words(p.text).empty();
            s.words = std::move(p.words);
            s.continued = p.continued;
            sentences.push_back(std::move(s));
        }
        text.remove_prefix(end);
        if (sentences.empty()) continue;
        queue(std::move(sentences), continuing);
        continuing = true;
    }
}

std::vector<std::int64_t> PiperStreamVoice::check_ids(std::span<const std::int64_t> ids) const {
    if (ids.empty()) throw Error(voice_->name() + ": no phoneme ids to speak");
    std::vector<std::int64_t> copy(ids.begin(), ids.end());
    voice_->check_ids(copy);
    return copy;
}

void PiperStreamVoice::set_voice(std::string_view) {
    throw Error("a Piper stream speaks its one voice (" + voice_->name() +
                "); create another stream for another voice");
}

// A sentence's ids to its prior: the text encoder, the durations and the
// prior's own generator, seeded from this stream's noise, in the order the
// sentences were pushed, so that a seed reproduces the audio.
std::optional<WorkItem> PiperStreamVoice::analyse(Sentence& sentence, std::string& refusal) {
    try {
        // The prior's sampling, the flow and (staged) the later durations
        // run on the producer, after the sentence's first audio (step()).
        // SSML's rate divides the pace; a Piper voice has no pitch control.
        auto scales = scales_;
        scales.length_scale /= sentence.prosody.rate;
        std::optional<VitsPrior> on_device = device_prior(sentence.phoneme_ids, scales);
        if (!on_device) ++analyses_cpu_;
        VitsPrior prior =
            on_device ? std::move(*on_device)
                      : voice_->network().text_to_latent().prior(
                            sentence.phoneme_ids, speaker_, scales, noise_, PriorDurations::Staged);
        if (prior.frames() == 0 && prior.complete()) return std::nullopt;
        auto l = std::make_shared<LatentSentence>();
        l->z.assign(std::size_t(prior.channels()) * std::size_t(prior.frames()), 0.0f);
        l->prior = std::move(prior);
        l->origin = sentence.origin;
        l->words = std::move(sentence.words);
        l->words_paired = sentence.words_paired;
        l->words_wanted = sentence.words_wanted;
        return WorkItem(std::move(l));
    } catch (const std::exception& e) {
        // Refused ids or durations past the limit (etude::Error), or no
        // memory: this sentence is unspeakable, and why is kept for
        // stats(); the stream and the shared worker go on.
        refusal = e.what();
        return std::nullopt;
    }
}

// A staged prior knows its first phonemes' frames only: a lower bound.
std::uint64_t PiperStreamVoice::estimated_samples(const WorkItem& item) const {
    const LatentSentence& s = *std::get<std::shared_ptr<LatentSentence>>(item);
    return static_cast<std::uint64_t>(static_cast<double>(s.prior.frames()) * voice_->hop() *
                                      rate_ / voice_->sample_rate());
}

void PiperStreamVoice::fill_stats(StreamStats& stats) const {
    DecoderVoice::fill_stats(stats);
    stats.flow_pushes_gpu = pushes_gpu_.load(std::memory_order_relaxed);
    stats.flow_pushes_cpu = pushes_cpu_.load(std::memory_order_relaxed);
    stats.flow_pushes_batched = pushes_batched_.load(std::memory_order_relaxed);
    stats.flow_takeovers = takeovers_.load(std::memory_order_relaxed);
    stats.analyses_gpu = analyses_gpu_.load(std::memory_order_relaxed);
    stats.analyses_cpu = analyses_cpu_.load(std::memory_order_relaxed);
    stats.analyses_near_tie = analyses_near_tie_.load(std::memory_order_relaxed);
    stats.analyses_batched = analyses_batched_.load(std::memory_order_relaxed);
}

// A Piper sentence, chunk by chunk: the flow and the decoder both stream
// with exact context (each frame through each once), and each chunk's
// audio goes out as soon as it is made, so first audio waits for the flow's
// first block (the chunk and the flow's 32 frames of look-ahead) and one
// chunk, not for the sentence. The last chunk ends the utterance at the
// sentence's end, as Piper's model calls do. A chunk is a step: between
// two, the sentence's place is the cursor (and the flow's and decoder's
// streaming state), not a loop's locals, so a stream needs no thread of
// its own to be halfway through a sentence.
void PiperStreamVoice::begin(WorkItem& item) {
    auto& s = std::get<std::shared_ptr<LatentSentence>>(item);
    start_flow();
    // Its audio starts where the ring's writing is now (the sentence before
    // it is written whole); each word's marks go in before the chunk it is
    // heard in.
    cursor_ = SentenceCursor{s, 0, chunk_frames_, WordCursor{ring_.write_position()}};
    if (s->words_wanted && !s->words_paired) sink_.note_words_unpaired();
}

Spoken PiperStreamVoice::step() {
    assert(cursor_.sentence && "step() without begin()");
    const ChunkOutcome outcome = speak_chunk(cursor_);
    if (outcome == ChunkOutcome::More)
        return {.more = true, .compute_seconds = take_compute_seconds()};
    // A sentence cancelled or dropped before its flush: the device flow's
    // lane stops waiting for its next push (the decoder's stream left with
    // mel_.reset()).
    if (outcome == ChunkOutcome::Dropped && device_flow_) device_flow_->leave_join_lane();
    cursor_ = {};
    return {.complete = outcome == ChunkOutcome::Done, .compute_seconds = take_compute_seconds()};
}

void PiperStreamVoice::reset() {
    // Between steps of a sentence: its device flow's lane stops waiting for
    // its next push, as after a dropped step.
    if (cursor_.sentence && device_flow_) device_flow_->leave_join_lane();
    cursor_ = {};
    DecoderVoice::reset();
}

// A sentence's first chunk is the latency budget's (chunk_frames_); each
// next one is as long as all the chunks before it (so 4, 4, 8, 16, 32
// frames, then 32 at most: kMaxLatentChunkFrames). Small chunks cost: 4
// frames take about a quarter more decoder time than 32
// (docs/benchmarks.md). A chunk no longer than the audio already made before
// it asks the producer to keep up with its listener and no more, as a
// fixed chunk does; doubling from the first chunk on (4, 8, 16) asked
// for twice that at the second and made listeners run dry over Wyoming.
// The schedule depends only on the position in the sentence, so a live
// stream and an offline render cut the same chunks and, on the CPU, give
// the same audio (on a GPU, chunks of several streams batched by timing
// agree within 1e-5: models/stream_joiner.h).
PiperStreamVoice::ChunkOutcome PiperStreamVoice::speak_chunk(SentenceCursor& c) {
    LatentSentence& s = *c.sentence;
    const int first = c.first;
    const int size = c.size;
    // The first push also covers the frames the decoder must see beyond its
    // first chunk before it makes any audio, so first audio waits for one
    // flow push, not two.
    const auto flow_until = [&](int count) {
        return first == 0 ? count + mel_.right_context_frames() : first + count;
    };
    // Past the last chunk: no turn to wait for.
    if (s.prior.complete() && first >= s.prior.frames()) return ChunkOutcome::Done;
    // The chunk's work (durations, flow, decoder) in its turn across
    // streams; vocode_frames gives it back before the audio goes in.
    DeadlineGate::Turn turn = sink_.wait_turn(s.origin);
    if (!turn.held() || ring_.cancelled(s.origin.generation)) {
        mel_.reset();
        return ChunkOutcome::Dropped;
    }
    // A staged prior (analyse()) has its first durations only; the rest
    // are made here, after the sentence's first audio, once the flow's
    // push for this chunk (which covers the chunk) would reach the known
    // frames' end.
    if (flow().needs_complete_prior(s.prior, flow_until(size))) {
        try {
            complete_prior(s.prior, s.z, s.flowed);
        } catch (const std::exception& e) {
            // Durations past the frame limit (etude::Error), or no
            // memory: the rest of the sentence is unspeakable.
            mel_.reset();
            sink_.note_unspeakable(e.what());
            return ChunkOutcome::Dropped;
        }
    }
    const int frames = s.prior.frames();
    if (first >= frames) return ChunkOutcome::Done;
    const int count = std::min(size, frames - first);
    if (ring_.cancelled(s.origin.generation)) {
        mel_.reset();
        return ChunkOutcome::Dropped;
    }
    if (first + count > s.flowed) {
        // A flow on the device gives the turn back first, as the
        // decoder's chunk on the device does (mel_scheduler.h): it
        // waits for the device and its batch, not for a core. (The
        // decoder then runs where it ran the last chunk: on the device,
        // bar a fault or a late device, when the CPU makes the chunk
        // outside the turns.)
        if (on_device_) {
            turn.release();
            // Its pushes may wait for other streams' to share the
            // device's batch, leaving the chunk's decoder its expected
            // time within the chunk's deadline (deadline.h).
            const std::int64_t now = rt::now_ns();
            const PlaybackState playback = ring_.playback_state();
            flow().set_join_wait_until(
                may_wait_to_join(playback)
                    ? join_wait_until_ns(
                          now, deadline_ns(now, playback),
                          mel_.gpu_frame_estimate_ns() * (count + mel_.right_context_frames()))
                    : 0);
        }
        try {
            s.flowed = run_flow(s, flow_until(count));
        } catch (const std::exception&) {
            mel_.reset();  // an error the CPU could not cover either: the sentence is dropped
            return ChunkOutcome::Dropped;
        }
    }
    // (Completed above whenever this chunk could reach the known end, so
    // `frames` still holds.)
    plan_words(s, first + count, c.words);
    copy_mel_frames(s.z, s.prior.channels(), frames, first, count, chunk_);
    const bool last = s.prior.complete() && first + count == frames;
    c.first = first + size;
    c.size = std::clamp(c.first, chunk_frames_, kMaxLatentChunkFrames);
    if (!vocode_frames(chunk_, count, last, s.origin, std::move(turn)))
        return ChunkOutcome::Dropped;
    return last ? ChunkOutcome::Done : ChunkOutcome::More;
}

// A sentence's flow runs where the decoder's last chunk was given first
// (its deadline priced the device and the CPU; a device too slow for the
// decoder's chunks is too slow for the flow), while the breaker allows it.
void PiperStreamVoice::start_flow() {
    const bool want = mel_.gpu_backend() && mel_.last_chunk_chose_gpu() &&
                      mel_.gpu_health().may_try(rt::now_ns());
    if (want && !device_flow_) open_device_flow();  // it failed before: tried again
    on_device_ = want && device_flow_;
    // The next sentence's analysis follows the decoder's choice too, and
    // joins the batches of the readers this stream's is among.
    analysis_wanted_on_device_ = wants_device_analysis();
    analysis_read_offline_ = sink_.read_offline();
    flow().reset();
    given_.clear();
    if (on_device_) given_.assign(std::size_t(voice_->channels()), {});
}

int PiperStreamVoice::run_flow(LatentSentence& s, int until) {
    VitsFlowStream& f = flow();
    const std::uint64_t before = f.pushes();
    if (!on_device_) {
        // After a takeover the CPU's pushes read the frames given to the
        // device again before drawing new ones (it may need fewer at once).
        const int made = given_.empty() ? f.run_until(s.prior, until, s.z)
                                        : f.run_until(replay(s), s.prior.frames(), until, s.z);
        pushes_cpu_ += f.pushes() - before;
        return made;
    }
    // The prior as drawn, kept for a CPU takeover (drawn before the upload,
    // so a push that fails keeps its frames too).
    const VitsFlowStream::PriorSource draw = [&](int first, int count, float* out) {
        s.prior.sample(first, count, out);
        for (std::size_t c = 0; c < given_.size(); ++c) {
            const float* row = out + c * std::size_t(count);
            given_[c].insert(given_[c].end(), row, row + count);
        }
    };
    // A push joins other streams' of the same flow in one batch (on a GPU,
    // models/stream_joiner.h); a stream read offline joins only offline
    // readers' (as the decoder's chunks do, decoder_voice.cpp: their lane's
    // thread runs below normal priority, as they do).
    f.set_batching(sink_.read_offline() ? Batching::JoinOffline : Batching::Join);
    const std::uint64_t batched_before = f.batched_pushes();
    try {
        const int made = f.run_until(draw, s.prior.frames(), until, s.z);
        if (f.pushes() > before) mel_.gpu_health().record_success();
        pushes_gpu_ += f.pushes() - before;
        pushes_batched_ += f.batched_pushes() - batched_before;
        return made;
    } catch (const gpu::DeviceError& e) {
        // The device's state (every layer's held frames) is lost with it;
        // the CPU's flow remakes it from the sentence's start (the flow is
        // deterministic), as the decoder's CPU tier remakes a chunk. One
        // push covers the frames given so far, so the rerun costs the CPU's
        // flow time for them: measured in docs/backends.md.
        pushes_gpu_ += f.pushes() - before;
        pushes_batched_ += f.batched_pushes() - batched_before;
        mel_.gpu_health().record_failure(rt::now_ns(), e.what());
        device_flow_->reset();  // waits out what is still queued
        mel_.gpu_backend()->reset_health();
        on_device_ = false;
        ++takeovers_;
        flow_->reset();
        if (given_.empty() || given_[0].empty()) given_.clear();  // nothing to give again
        return run_flow(s, until);
    }
}

// The frames given to the device this sentence, then the prior's next ones
// as drawn.
VitsFlowStream::PriorSource PiperStreamVoice::replay(LatentSentence& s) {
    return [this, &s](int first, int count, float* out) {
        const int given = int(given_[0].size());
        const int again = std::clamp(given - first, 0, count);
        for (std::size_t c = 0; again > 0 && c < given_.size(); ++c)
            std::copy_n(given_[c].begin() + first, again, out + c * std::size_t(count));
        if (again == count) return;
        // Past the given frames: drawn now, [channels][rest], then spread.
        const int rest = count - again;
        std::vector<float> drawn(given_.size() * std::size_t(rest));
        s.prior.sample(first + again, rest, drawn.data());
        for (std::size_t c = 0; c < given_.size(); ++c)
            std::copy_n(drawn.begin() + std::ptrdiff_t(c) * rest, rest,
                        out + c * std::size_t(count) + again);
    };
}

// A word is heard after the frames of the ids before its first: each id
// lasts its duration in frames of `hop` samples of the voice's rate. Only
// durations already made are read; the flow has been completed as far as
// the chunk ending at `until` needs. The marks go in as the audio does,
// since a chunk's audio can come out later.
void PiperStreamVoice::plan_words(const LatentSentence& s, int until, WordCursor& w) {
    if (!s.words_wanted) return;
    const std::vector<int>& durations = s.prior.durations();
    const double samples_per_frame = double(voice_->hop()) * rate_ / voice_->sample_rate();
    while (w.next < s.words.size()) {
        const WordStart& word = s.words[w.next];
        if (word.start > durations.size()) return;
        for (; w.id < word.start; ++w.id) w.frames += durations[w.id];
        if (w.frames >= until) return;
        sink_.plan_word(word.text, w.start, double(w.frames) * samples_per_frame,
                        s.origin.generation);
        ++w.next;
    }
}

}  // namespace etude::engine
