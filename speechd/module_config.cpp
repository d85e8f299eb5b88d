#include "speechd/module_config.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "speechd/log.h"

namespace etude::speechd {

namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

std::string unquote(std::string s) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
    return s;
}

void add_piper_voices(ModuleConfig& config, const std::string& list) {
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ':'))
        if (!trim(item).empty()) config.piper_voices.push_back(trim(item));
}

}  // namespace

ModuleConfig read_module_config(const std::string& path) {
    ModuleConfig config;
    if (!path.empty()) {
        std::ifstream file(path);
        if (!file) log_line(2, "no configuration at '" + path + "'; using the defaults");
        std::string line;
        while (std::getline(file, line)) {
            line = trim(line);
            if (line.empty() || line[0] == '#') continue;
            const auto space = line.find_first_of(" \t");
            const std::string key = line.substr(0, space);
            const std::string value =
                space == std::string::npos ? "" : unquote(trim(line.substr(space)));
            if (key == "DefaultVoice")
                config.default_voice = value;
            else if (key == "PiperVoice")
                config.piper_voices.push_back(value);
            else if (key == "Backend")
                config.backend = value;
            else if (key == "SoundIconFolder")
                config.sound_icon_folder = value;
            else if (key == "SymbolsFolder")
                config.symbols_folder = value;
            else
                log_line(2, "etude.conf: unknown key '" + key + "' ignored");
        }
    }
    if (const char* v = std::getenv("ETUDE_SD_VOICE"); v && *v) config.default_voice = v;
    if (const char* v = std::getenv("ETUDE_SD_PIPER_VOICES")) add_piper_voices(config, v);
    if (const char* v = std::getenv("ETUDE_SD_BACKEND"); v && *v) config.backend = v;
    if (const char* v = std::getenv("ETUDE_SD_SOUND_ICONS")) config.sound_icon_folder = v;
    if (const char* v = std::getenv("ETUDE_SD_SYMBOLS")) config.symbols_folder = v;
    return config;
}

}  // namespace etude::speechd
