#include "engine/voices/flite_stream_voice.h"

#include <algorithm>
#include <cmath>

#include "engine/ssml_prosody.h"
#include "engine/streams/playback_ring.h"
#include "engine/streams/text_input.h"
#include "engine/voices/flite_voice.h"

namespace etude::engine {
FliteStreamVoice::FliteStreamVoice(EngineWorkers& workers, const StreamOptions& options,
                                   const FaultSpec& faults, const FliteVoice& voice,
                                   const PlaybackRing& ring, VoiceSink& sink,
                                   BlockRecorder& records)
    : first_voice_(&voice),
      next_voice_(&voice),
      rate_(options.sample_rate),
      length_scale_(checked_length_scale(std::get<BuiltinVoiceOptions>(options.voice).length_scale,
                                         voice.name())),
      render_ahead_(std::get<BuiltinVoiceOptions>(options.voice).render_ahead),
      ring_(ring),
      sink_(sink),
      blocks_(workers, options, faults, voice, ring, sink, records) {}

// The voice the stream was made with: set_voice() changes what later text
// is spoken with, not the stream's name.
const std::string& FliteStreamVoice::name() const {
    return first_voice_->name();
}

void FliteStreamVoice::split(std::string_view text, bool words, const QueueSentences& queue) {
    auto pieces = split_sentences(text);
    if (pieces.empty()) return;
    const FliteVoice* voice = next_voice_.load(std::memory_order_acquire);
    std::vector<Sentence> sentences(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        sentences[i].text = std::move(pieces[i]);
        sentences[i].voice = voice;
        sentences[i].words_wanted = words;
    }
    queue(std::move(sentences), false);
}

void FliteStreamVoice::set_voice(std::string_view name) {
    next_voice_.store(&FliteVoice::load(name), std::memory_order_release);
}

std::optional<WorkItem> FliteStreamVoice::analyse(Sentence& sentence, std::string&) {
    AcousticFrames frames;
    try {
        // SSML's rate divides the stretch, within the bounds the stream's own has.
        const float stretch = std::clamp(length_scale_ / sentence.prosody.rate, 0.1f, 10.0f);
        frames = sentence.voice->analyse(sentence.text, stretch);
        shape_f0(frames.f0, sentence.prosody);
    } catch (const Error&) {
        return std::nullopt;  // a front-end error: counted as dropped
    }
    if (frames.frames <= 1) return std::nullopt;  // only symbols Flite skips
    auto u = std::make_shared<AnalysedSentence>();
    u->frames = std::move(frames);
    u->voice = sentence.voice;
    u->origin = sentence.origin;
    u->words_wanted = sentence.words_wanted;
    return WorkItem(std::move(u));
}

std::uint64_t FliteStreamVoice::estimated_samples(const WorkItem& item) const {
    const AnalysedSentence& u = *std::get<std::shared_ptr<AnalysedSentence>>(item);
    return static_cast<std::uint64_t>(static_cast<double>(u.frames.frames) *
                                      u.voice->vocoder_config().frame_period * rate_ /
                                      u.voice->sample_rate());
}

// The stream has settled who makes the sentence (StreamCore::produce()):
// scheduled here block by block, or made ahead by a render worker, whose
// audio is copied.
Spoken FliteStreamVoice::speak(WorkItem& item) {
    const AnalysedSentence& u = *std::get<std::shared_ptr<AnalysedSentence>>(item);
    plan_words(u);
    const bool complete =
        u.state == AnalysedSentence::Scheduled ? blocks_.schedule(u) : blocks_.copy_ahead(u);
    return {.complete = complete,
            .compute_seconds = static_cast<double>(blocks_.compute_ns()) / 1e9};
}

// Planned as the sentence starts: its audio begins at the ring's write
// position now (the one before it is written whole), and a frame of the
// voice is frame_period of its samples.
void FliteStreamVoice::plan_words(const AnalysedSentence& u) {
    if (!u.words_wanted) return;
    const std::uint64_t start = ring_.write_position();
    const double samples_per_frame = static_cast<double>(u.voice->vocoder_config().frame_period) *
                                     rate_ / u.voice->sample_rate();
    for (const WordStart& w : u.frames.words)
        sink_.plan_word(w.text, start, double(w.start) * samples_per_frame, u.origin.generation);
}

}  // namespace etude::engine
