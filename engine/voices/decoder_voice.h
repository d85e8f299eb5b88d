// What a Piper stream and a mel stream share: their audio is decoded chunk
// by chunk through a MelScheduler (a neural decoder with GPU and CPU tiers,
// chosen per chunk by the same deadline as text blocks), on the producer.
#pragma once

#include <cstdint>
#include <span>

#include "engine/scheduling/mel_scheduler.h"
#include "engine/voices/stream_voice.h"

namespace etude::engine {

class DecoderVoice : public StreamVoice {
  public:
    void reset() override { mel_.reset(); }
    void fill_stats(StreamStats& stats) const override;

  protected:
    DecoderVoice(MelSchedulerOptions options, const PlaybackRing& ring, VoiceSink& sink,
                 BlockRecorder& records);
    // One chunk of `count` frames through the mel scheduler in `turn`
    // (VoiceSink::wait_turn, granted: a caller that got none stops there),
    // which is given back as the chunk goes to the device (mel_scheduler.h
    // says why) or else before its audio goes into the ring (`last` ends
    // the utterance). A caller whose work before the chunk went to the
    // device has given it back already (a Piper stream's flow). False when
    // cancelled, or a device error the CPU could not cover either.
    bool vocode_frames(std::span<const float> frames, int count, bool last,
                       const ItemOrigin& origin, DeadlineGate::Turn turn);
    // The decoder time since the last take (a step's), reset for the next.
    double take_compute_seconds();

    MelScheduler mel_;
    const PlaybackRing& ring_;
    VoiceSink& sink_;

  private:
    BlockRecorder& records_;
    std::int64_t compute_ns_ = 0;
};

}  // namespace etude::engine
