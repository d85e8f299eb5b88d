// engine/builtin_voices.h over FliteVoice (flite_voice.h).
#include "engine/builtin_voices.h"

#include "engine/voices/flite_voice.h"

namespace etude::engine {

BuiltinVoiceVocoding builtin_voice_vocoding(const std::string& name) {
    const auto& voice = FliteVoice::load(name);
    return {voice.sample_rate(), voice.vocoder_config().order,
            voice.vocoder_config().band_filters.size()};
}

std::size_t flite_reference_synthesis(const std::string& name, std::string_view text) {
    return FliteVoice::load(name).flite_synthesize(text);
}

}  // namespace etude::engine
