#include "engine/stream_voice.h"

#include "engine/flite_stream_voice.h"
#include "engine/mel_stream_voice.h"
#include "engine/piper_stream_voice.h"

namespace etude::engine {

std::vector<std::int64_t> StreamVoice::check_ids(std::span<const std::int64_t>) const {
    throw Error(
        "push_phoneme_ids needs a Piper stream: create it with StreamOptions::piper_voice set");
}

void StreamVoice::set_voice(std::string_view) {
    throw Error("this stream vocodes mel frames (StreamOptions::model); it has no text voice");
}

std::unique_ptr<StreamVoice> make_stream_voice(EngineWorkers& workers, const StreamOptions& options,
                                               const FaultSpec& faults, const FliteVoice& voice,
                                               std::shared_ptr<const PiperVoice> piper,
                                               const PlaybackRing& ring, VoiceSink& sink,
                                               BlockRecorder& records) {
    if (piper)
        return std::make_unique<PiperStreamVoice>(std::move(piper), options, faults, ring, sink,
                                                  records);
    if (!options.model.empty())
        return std::make_unique<MelStreamVoice>(voice.name(), options, faults, ring, sink, records);
    return std::make_unique<FliteStreamVoice>(workers, options, faults, voice, ring, sink, records);
}

}  // namespace etude::engine
