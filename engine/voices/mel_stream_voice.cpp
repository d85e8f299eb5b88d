#include "engine/voices/mel_stream_voice.h"

#include <utility>

#include "engine/scheduling/fault_plan.h"

namespace etude::engine {
namespace {

MelSchedulerOptions mel_options(const StreamOptions& options, const FaultSpec& faults) {
    const auto& mel = std::get<MelVoiceOptions>(options.voice);
    MelSchedulerOptions m;
    m.model_path = mel.model;
    m.cpu_model_path = mel.cpu_model;
    m.backend = options.backend;
    m.device = options.device;
    m.output_rate = options.sample_rate;
    if (faults.device) m.gpu_fault = *faults.device;
    m.cpu_busy = faults.cpu_busy;
    m.allow_phase_fallback = mel.allow_phase_fallback;
    return m;
}

}  // namespace

MelStreamVoice::MelStreamVoice(std::string name, const StreamOptions& options,
                               const FaultSpec& faults, const PlaybackRing& ring, VoiceSink& sink,
                               BlockRecorder& records)
    : DecoderVoice(mel_options(options, faults), ring, sink, records), name_(std::move(name)) {}

std::size_t MelStreamVoice::mel_bands() const {
    return static_cast<std::size_t>(mel_.audio().n_mels);
}

// Only end_input()'s empty rest comes here: StreamCore refuses text for a
// voice with mel bands, and ending a mel stream's (absent) text is no error.
void MelStreamVoice::split(std::string_view, bool, const QueueSentences&) {}

// Never called: a mel stream's chunks go straight to the producer's queue
// (push_mel), and its text queue stays empty.
std::optional<WorkItem> MelStreamVoice::analyse(Sentence&, std::string&) {
    return std::nullopt;
}

std::uint64_t MelStreamVoice::estimated_samples(const WorkItem& item) const {
    const MelChunk& c = *std::get<std::shared_ptr<MelChunk>>(item);
    return static_cast<std::uint64_t>(static_cast<double>(c.frames) * mel_.audio().hop *
                                      mel_.output_rate() / mel_.audio().sample_rate);
}

Spoken MelStreamVoice::speak(WorkItem& item) {
    const MelChunk& c = *std::get<std::shared_ptr<MelChunk>>(item);
    DeadlineGate::Turn turn = sink_.wait_turn(c.origin);
    if (!turn.held()) {  // cancelled or shut down while it waited
        reset();
        return {.complete = false, .compute_seconds = take_compute_seconds()};
    }
    const bool complete =
        vocode_frames(c.mel, static_cast<int>(c.frames), c.last, c.origin, std::move(turn));
    return {.complete = complete, .compute_seconds = take_compute_seconds()};
}

}  // namespace etude::engine
