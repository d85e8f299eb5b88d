// A built-in voice's stream: Flite's front end analyses each sentence into
// acoustic frames (on an engine worker), and the BlockScheduler vocodes
// them block by block on the CPU processors or a GPU (the producer), or
// copies the audio an engine render worker made ahead.
#pragma once

#include <atomic>
#include <cassert>
#include <memory>
#include <string>
#include <utility>

#include "engine/scheduling/block_scheduler.h"
#include "engine/voices/stream_voice.h"

namespace etude::engine {

class FliteStreamVoice final : public StreamVoice {
  public:
    /// Throws etude::Error for a length_scale out of 0.1..10.
    FliteStreamVoice(EngineWorkers& workers, const StreamOptions& options, const FaultSpec& faults,
                     const FliteVoice& voice, const PlaybackRing& ring, VoiceSink& sink,
                     BlockRecorder& records);

    const std::string& name() const override;
    const char* vocoder() const override { return blocks_.spectral() ? "spectral" : "mlsa"; }
    bool producer_realtime() const override { return true; }
    void split(std::string_view text, bool words, const QueueSentences& queue) override;
    void set_voice(std::string_view name) override;
    std::optional<WorkItem> analyse(Sentence& sentence, std::string& refusal) override;
    // Flite keeps process-wide state: FliteVoice::analyse holds its lock.
    bool analyses_one_at_a_time() const override { return true; }
    bool renders_ahead() const override { return render_ahead_ && !blocks_.spectral(); }
    std::uint64_t estimated_samples(const WorkItem& item) const override;
    // A sentence is one step: begin() takes it, step() speaks it whole.
    void begin(WorkItem& item) override { item_ = &item; }
    Spoken step() override {
        assert(item_ && "step() without begin()");
        return speak(*std::exchange(item_, nullptr));
    }
    void reset() override { item_ = nullptr; }
    void wait_for_device() override { blocks_.wait_for_device(); }
    void stop() override { blocks_.stop(); }
    void fill_stats(StreamStats& stats) const override { blocks_.fill_stats(stats); }
    std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> kernel_timings()
        const override {
        return blocks_.kernel_timings();
    }

  private:
    Spoken speak(WorkItem& item);
    WorkItem* item_ = nullptr;  // begin()'s, until its step
    // The sentence's words, to be marked as the audio they start in is written.
    void plan_words(const AnalysedSentence& sentence);

    const FliteVoice* first_voice_;
    std::atomic<const FliteVoice*> next_voice_;  // set_voice(): for text split from now on
    const double rate_;
    const float length_scale_;  // BuiltinVoiceOptions::length_scale, or 1
    const bool render_ahead_;
    const PlaybackRing& ring_;
    VoiceSink& sink_;
    BlockScheduler blocks_;
};

}  // namespace etude::engine
