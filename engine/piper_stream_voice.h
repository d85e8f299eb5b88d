// A Piper voice's stream: espeak-ng finds the sentences and their phonemes
// on the pushing thread; an engine worker runs the network's text encoder
// and durations into the sentence's prior; the producer streams the flow
// and decodes the latent chunk by chunk through the decoder's tiers.
#pragma once

#include <memory>
#include <random>
#include <string>

#include "engine/decoder_voice.h"
#include "engine/models/vits/flow_stream.h"
#include "engine/piper_voice.h"

namespace etude::engine {

class PiperStreamVoice final : public DecoderVoice {
  public:
    /// Throws etude::Error for a speaker the voice does not have.
    PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, const StreamOptions& options,
                     const FaultSpec& faults, const PlaybackRing& ring, VoiceSink& sink,
                     BlockRecorder& records);

    const std::string& name() const override { return voice_->name(); }
    const char* vocoder() const override { return "vits"; }
    // Piper's front end splits sentences itself (espeak-ng's clauses), so
    // its input holds a long sentence whole rather than cutting it.
    SentenceAccumulator make_input() const override { return SentenceAccumulator(0); }
    // A live Piper stream has nothing else to cover a late chunk.
    bool producer_realtime() const override { return true; }
    void split(std::string_view text, bool words, const QueueSentences& queue) override;
    std::vector<std::int64_t> check_ids(std::span<const std::int64_t> ids) const override;
    void set_voice(std::string_view name) override;
    std::optional<WorkItem> analyse(Sentence& sentence, std::string& refusal) override;
    bool holds_analysis_until_first_audio() const override { return true; }
    Spoken speak(WorkItem& item) override;
    std::uint64_t estimated_samples(const WorkItem& item) const override;

  private:
    PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, const PiperVoiceOptions& piper,
                     const StreamOptions& options, const FaultSpec& faults,
                     const PlaybackRing& ring, VoiceSink& sink, BlockRecorder& records);
    // After the speaker and scales are known good: the decoder (and its
    // device) is opened only for options that are.
    PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, int speaker, VitsScales scales,
                     const StreamOptions& options, const FaultSpec& faults,
                     const PlaybackRing& ring, VoiceSink& sink, BlockRecorder& records);
    // Where speak() is in its sentence's word marks.
    struct WordCursor {
        std::uint64_t start = 0;  // ring position of the sentence's first sample
        std::size_t next = 0;     // the next word to plan
        std::size_t id = 0;       // ids whose frames `frames` holds
        std::int64_t frames = 0;
    };
    bool vocode_latent(LatentSentence& sentence);
    // The words whose frames are known, up to frame `until`, planned.
    void plan_words(const LatentSentence& sentence, int until, WordCursor& words);

    const std::shared_ptr<const PiperVoice> voice_;
    const double rate_;
    // Fixed at creation; the noise is used by one engine worker at a time
    // (the stream analyses one sentence at a time), in the pushed order.
    const int speaker_;
    const VitsScales scales_;
    std::mt19937_64 noise_;
    int chunk_frames_ = 1;  // latent frames in a sentence's first chunk (then growing)
    // Producer thread: the sentence's flow.
    std::unique_ptr<VitsFlowStream> flow_;
};

}  // namespace etude::engine
