// What the module is told at start: etude.conf (the path the server passes
// as argv[1]) and the environment.
#pragma once

#include <string>
#include <vector>

namespace etude::speechd {

struct ModuleConfig {
    /// The voice spoken when no SET names one: "slt", "rms", "awb" or a
    /// Piper voice as PiperVoiceOptions::piper_voice takes it.
    std::string default_voice = "slt";
    /// Piper voices to list and preload (names or paths).
    std::vector<std::string> piper_voices;
    /// Where Piper voices' decoders run (StreamOptions::backend).
    std::string backend = "auto";
    /// SOUND_ICON's files (Debian's sound-icons package); empty: icons are
    /// spoken by name.
    std::string sound_icon_folder = "/usr/share/sounds/sound-icons/";
    /// speech-dispatcher's symbol tables (LANG/symbols.dic), read when the
    /// server leaves punctuation to the module; empty: symbols are not spoken.
    std::string symbols_folder = "/usr/share/speech-dispatcher/locale";
};

/// Reads `path` (lines "Key value", '#' comments, values optionally in
/// double quotes, as speech-dispatcher's own module files). A missing file
/// is not an error: the server passes the path even when none exists.
/// Then the environment overrides: ETUDE_SD_VOICE (the default voice),
/// ETUDE_SD_PIPER_VOICES (more Piper voices, ':'-separated),
/// ETUDE_SD_BACKEND, ETUDE_SD_SOUND_ICONS (the icon folder), ETUDE_SD_SYMBOLS (the symbol tables'
/// folder). Unknown keys are logged and ignored.
ModuleConfig read_module_config(const std::string& path);

}  // namespace etude::speechd
