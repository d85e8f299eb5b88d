// The voices the module offers: LIST VOICES and the names SET may choose.
#pragma once

#include <string>
#include <vector>

#include "speechd/module_config.h"

namespace etude::speechd {

struct ModuleVoice {
    std::string name;      ///< as listed and as synthesis_voice names it
    std::string language;  ///< "en", "en-US"
    std::string variant;   ///< a Piper speaker, or "none"
    std::string builtin;   ///< "slt", "rms", "awb"; empty for a Piper voice
    std::string piper;     ///< PiperVoiceOptions::piper_voice
    std::string speaker;   ///< PiperVoiceOptions::speaker; empty: the voice's default
    /// Loaded when the module starts (the configured voices); a voice found
    /// only in the voice folders loads at its first message instead, so
    /// that many installed voices do not all sit in memory.
    bool preload = false;
};

/// The built-in voices, then each configured Piper voice (etude.conf,
/// ETUDE_SD_PIPER_VOICES) and each installed in the voice folders
/// (Engine::installed_voices()) that the public API can describe. A voice with
/// several speakers is listed once as NAME (its default speaker) and once
/// per speaker as NAME#SPEAKER with the speaker as the variant, because
/// synthesis_voice carries only a name.
class VoiceList {
  public:
    /// Describes the configured voices; ones that cannot be read are
    /// logged and left out. `default_voice` comes first among its kind.
    explicit VoiceList(const ModuleConfig& config);
    const std::vector<ModuleVoice>& voices() const { return voices_; }
    /// The voice named `name` (as listed, or a built-in name), or nullptr.
    const ModuleVoice* find(const std::string& name) const;
    /// The configured default (the built-in "slt" if that is unusable).
    const ModuleVoice& default_voice() const;
    /// The reply to LIST VOICES [LANGUAGE [VARIANT]], final line included,
    /// filtered as speech-dispatcher's own modules filter it (its server
    /// sends the client's filter on since 0.12): a voice of LANGUAGE, or of
    /// its region ("en" takes "en-US"), any case; then of VARIANT, if
    /// given. None left: 304, as those modules answer.
    std::string list_reply(const std::string& language = {}, const std::string& variant = {}) const;

  private:
    std::vector<ModuleVoice> voices_;
    std::string default_name_;
};

}  // namespace etude::speechd
