#include "engine/mel_stream_voice.h"

#include <utility>

#include "engine/fault_plan.h"

namespace etude::engine {
namespace {

MelSchedulerOptions mel_options(const StreamOptions& options, const FaultSpec& faults) {
    MelSchedulerOptions m;
    m.model_path = options.model;
    m.cpu_model_path = options.cpu_model;
    m.backend = options.backend;
    m.device = options.device;
    m.output_rate = options.sample_rate;
    if (faults.device) m.gpu_fault = *faults.device;
    m.allow_phase_fallback = options.allow_phase_fallback;
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

// Never called: StreamCore refuses text for a voice with mel bands.
void MelStreamVoice::split(std::string_view, bool, const QueueSentences&) {
    throw Error("this stream vocodes mel frames (StreamOptions::model); use push_mel");
}

std::optional<WorkItem> MelStreamVoice::analyse(Sentence&, std::string&) {
    return std::nullopt;
}

Spoken MelStreamVoice::speak(WorkItem& item) {
    const MelChunk& c = *std::get<std::shared_ptr<MelChunk>>(item);
    const bool complete = vocode_frames(c.mel, static_cast<int>(c.frames), c.last, c.origin);
    return {complete, take_compute_seconds()};
}

}  // namespace etude::engine
