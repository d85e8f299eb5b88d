#include "engine/voices/stream_voice.h"

#include <cmath>
#include <cstdio>

#include "engine/voices/flite_stream_voice.h"
#include "engine/voices/mel_stream_voice.h"
#include "engine/voices/piper_stream_voice.h"

namespace etude::engine {

std::vector<std::int64_t> StreamVoice::check_ids(std::span<const std::int64_t>) const {
    throw Error(
        "push_phoneme_ids needs a Piper stream: create it with PiperVoiceOptions::piper_voice set");
}

void StreamVoice::set_voice(std::string_view) {
    throw Error("this stream vocodes mel frames (MelVoiceOptions::model); it has no text voice");
}

float checked_length_scale(std::optional<float> length_scale, const std::string& voice) {
    const float v = length_scale.value_or(1.0f);
    if (!(std::isfinite(v) && v >= 0.1f && v <= 10.0f)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", v);
        throw Error(voice + ": length_scale must be from 0.1 to 10, not " + text);
    }
    return v;
}

std::unique_ptr<StreamVoice> make_stream_voice(EngineWorkers& workers, const StreamOptions& options,
                                               const FaultSpec& faults, const FliteVoice& voice,
                                               std::shared_ptr<const PiperVoice> piper,
                                               const PlaybackRing& ring, VoiceSink& sink,
                                               BlockRecorder& records) {
    if (piper)
        return std::make_unique<PiperStreamVoice>(std::move(piper), options, faults, ring, sink,
                                                  records);
    if (std::holds_alternative<MelVoiceOptions>(options.voice))
        return std::make_unique<MelStreamVoice>(voice.name(), options, faults, ring, sink, records);
    return std::make_unique<FliteStreamVoice>(workers, options, faults, voice, ring, sink, records);
}

}  // namespace etude::engine
