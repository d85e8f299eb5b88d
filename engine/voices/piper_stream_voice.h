// A Piper voice's stream: espeak-ng finds the sentences and their phonemes
// on the pushing thread; an engine worker runs the network's text encoder
// and durations into the sentence's prior (on the decoder's device where
// the flow would go, on a GPU in one batch with other streams' sentences
// analysed there at the same time, else on the host; the host also makes a
// sentence the device failed or whose durations lie near a tie); the
// producer streams the flow and decodes the latent chunk by chunk through
// the decoder's tiers. The flow runs on the decoder's device while the decoder's chunks go there (a
// sentence at a time: a device error hands the rest of the sentence to the
// CPU's flow, which first reruns the prior given to the device so far; the
// next sentence tries the device again as the decoder's breaker allows).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "engine/models/vits/flow_stream.h"
#include "engine/voices/decoder_voice.h"
#include "engine/voices/piper_voice.h"

namespace etude::engine {

class PiperStreamVoice final : public DecoderVoice {
  public:
    // The most latent frames a Piper stream decodes at once (about 0.37 s at
    // 22050 Hz): a larger latency budget gains nothing from larger chunks.
    // A sentence's chunks grow to it, so it is a stream's unit of decoder
    // work in steady state (what admission on a device times).
    static constexpr int kMaxLatentChunkFrames = 32;

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
    // A chunk's step on the CPU (no device for this stream): its durations,
    // flow and decoder, and one chunk's audio.
    bool steps_on_a_pool() const override { return !mel_.gpu_backend(); }
    void split(std::string_view text, bool words, const QueueSentences& queue) override;
    std::vector<std::int64_t> check_ids(std::span<const std::int64_t> ids) const override;
    void set_voice(std::string_view name) override;
    std::optional<WorkItem> analyse(Sentence& sentence, std::string& refusal) override;
    bool holds_analysis_until_first_audio() const override { return true; }
    // A sentence's unit is a chunk: begin() starts its flow, each step()
    // makes one chunk's durations, flow and decoder and writes its audio.
    void begin(WorkItem& item) override;
    Spoken step() override;
    // Drops the sentence in progress too (its cursor), not only the decoder's stream.
    void reset() override;
    std::uint64_t estimated_samples(const WorkItem& item) const override;
    void fill_stats(StreamStats& stats) const override;

  private:
    PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, const PiperVoiceOptions& piper,
                     const StreamOptions& options, const FaultSpec& faults,
                     const PlaybackRing& ring, VoiceSink& sink, BlockRecorder& records);
    // After the speaker and scales are known good: the decoder (and its
    // device) is opened only for options that are.
    PiperStreamVoice(std::shared_ptr<const PiperVoice> voice, int speaker, VitsScales scales,
                     const StreamOptions& options, const FaultSpec& faults,
                     const PlaybackRing& ring, VoiceSink& sink, BlockRecorder& records);
    // Where the sentence being spoken is in its word marks.
    struct WordCursor {
        std::uint64_t start = 0;  // ring position of the sentence's first sample
        std::size_t next = 0;     // the next word to plan
        std::size_t id = 0;       // ids whose frames `frames` holds
        std::int64_t frames = 0;
    };
    // Where the sentence being spoken has got to between steps: all a
    // chunk needs of the chunks before it (with the flow's and the
    // decoder's own streaming state and LatentSentence::flowed).
    struct SentenceCursor {
        std::shared_ptr<LatentSentence> sentence;
        int first = 0;  // the next chunk's first latent frame
        int size = 0;   // the next chunk's frames, before the sentence's end cuts it
        WordCursor words;
    };
    enum class ChunkOutcome { More, Done, Dropped };
    // The cursor's next chunk, the cursor moved past it.
    ChunkOutcome speak_chunk(SentenceCursor& cursor);
    // The device's flow stream, if the decoder has a device (see the .cpp).
    void open_device_flow();
    // The device's text analysis (PiperVoice::load_analysis), if the decoder
    // has a device; a device error counts in the breaker.
    void open_device_analysis();
    // A sentence's prior made on the device, or none where the host is to
    // make it (see the .cpp). Engine worker.
    bool wants_device_analysis() const;
    std::optional<VitsPrior> device_prior(std::span<const std::int64_t> ids,
                                          const VitsScales& scales);
    // Starts a sentence's flow: on the device while the decoder's chunks go
    // there and its breaker allows.
    void start_flow();
    // The flow in use for this sentence.
    VitsFlowStream& flow() { return on_device_ ? *device_flow_ : *flow_; }
    // Runs the sentence's flow until its output reaches `until` frames (as
    // VitsFlowStream::run_until); a device error passes it to the CPU.
    int run_flow(LatentSentence& sentence, int until);
    VitsFlowStream::PriorSource replay(LatentSentence& sentence);
    // The words whose frames are known, up to frame `until`, planned.
    void plan_words(const LatentSentence& sentence, int until, WordCursor& words);

    const std::shared_ptr<const PiperVoice> voice_;
    const double rate_;
    // Fixed at creation; the noise is used by one engine worker at a time
    // (the stream analyses one sentence at a time), in the pushed order.
    const int speaker_;
    const VitsScales scales_;
    std::mt19937_64 noise_;
    const bool host_analysis_;  // a drill's (fault_plan.h)
    int chunk_frames_ = 1;      // latent frames in a sentence's first chunk (then growing)
    // Producer thread: the sentence being spoken (begin() to its last
    // step()), and the scratch its chunks' frames are copied into.
    SentenceCursor cursor_;
    std::vector<float> chunk_;
    // Producer thread: the sentence's flow on the CPU, and on the decoder's
    // device when it has one; on_device_ says which runs this sentence.
    std::unique_ptr<VitsFlowStream> flow_, device_flow_;
    bool on_device_ = false;
    // While on the device: the prior's frames given to it this sentence,
    // per channel (the CPU reruns them after a device error: the prior is
    // drawn once, in order).
    std::vector<std::vector<float>> given_;
    std::atomic<std::uint64_t> pushes_gpu_{0}, pushes_cpu_{0}, pushes_batched_{0}, takeovers_{0};
    // Whether the next sentence's analysis goes to the device: where the
    // flow's last sentence went by the decoder's choice (start_flow, on the
    // producer; read by the analysing worker).
    std::atomic<bool> analysis_wanted_on_device_{false};
    // Whether the stream is read offline, as the producer last saw it (the
    // sink's flag is the producer's): whose batches its analysis joins.
    std::atomic<bool> analysis_read_offline_{false};
    // The analysing worker's (one sentence at a time): the device's text
    // analysis, and whether it cannot be had (the voice file no longer
    // matches: PiperVoice::load_analysis), so it is not tried again.
    std::shared_ptr<const VitsAnalysisNetwork> device_analysis_;
    bool device_analysis_refused_ = false;
    std::atomic<std::uint64_t> analyses_gpu_{0}, analyses_cpu_{0}, analyses_near_tie_{0},
        analyses_batched_{0};
};

}  // namespace etude::engine
