// A mel stream (MelVoiceOptions::model): someone else's acoustic model gives
// log-mel frames (Stream::push_mel), which go straight to the producer as
// MelChunks and through the neural vocoder's tiers. It speaks no text.
#pragma once

#include <cassert>
#include <string>
#include <utility>

#include "engine/voices/decoder_voice.h"

namespace etude::engine {

class MelStreamVoice final : public DecoderVoice {
  public:
    /// Loads the model (and the cheaper CPU model, if one is named); throws
    /// etude::Error for a bad model file.
    /// `name`: the built-in voice the options name (Stream::voice() reports it).
    MelStreamVoice(std::string name, const StreamOptions& options, const FaultSpec& faults,
                   const PlaybackRing& ring, VoiceSink& sink, BlockRecorder& records);

    const std::string& name() const override { return name_; }
    const char* vocoder() const override { return "neural"; }
    std::size_t mel_bands() const override;
    // Its networks run on the producer at normal priority.
    bool producer_realtime() const override { return false; }
    void split(std::string_view text, bool words, const QueueSentences& queue) override;
    std::optional<WorkItem> analyse(Sentence& sentence, std::string& refusal) override;
    // A push is one step: begin() takes it, step() speaks it whole.
    void begin(WorkItem& item) override { item_ = &item; }
    Spoken step() override {
        assert(item_ && "step() without begin()");
        return speak(*std::exchange(item_, nullptr));
    }
    void reset() override {
        item_ = nullptr;
        DecoderVoice::reset();
    }
    std::uint64_t estimated_samples(const WorkItem& item) const override;

  private:
    Spoken speak(WorkItem& item);
    WorkItem* item_ = nullptr;  // begin()'s, until its step
    const std::string name_;
};

}  // namespace etude::engine
