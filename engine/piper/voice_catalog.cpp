#include "engine/piper/voice_catalog.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>

#include "engine/error.h"

namespace etude::piper {
namespace fs = std::filesystem;
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

VoiceFiles files_of(const fs::path& model) {
    VoiceFiles v;
    v.model_path = model.string();
    v.config_path = v.model_path + ".json";
    v.name = model.stem().string();  // "x.onnx" -> "x"
    v.model_present = is_file(model);
    return v;
}

bool is_folder(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

bool is_config(const fs::path& p) {
    return ends_with(p.string(), ".onnx.json") && is_file(p);
}

// What folder holds, or as much of it as can be read. A folder that cannot be
// opened or read to the end (another user's, removed meanwhile) gives what it
// gave so far, so that one unreadable folder never hides the voices beside it.
std::vector<fs::path> entries_of(const fs::path& folder) {
    std::vector<fs::path> entries;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        entries.push_back(it->path());
    return entries;
}

// NAME.onnx.json in folder or in folder/NAME/.
std::optional<VoiceFiles> find_in(const fs::path& folder, const std::string& name) {
    for (const fs::path& model : {folder / (name + ".onnx"), folder / name / (name + ".onnx")})
        if (is_file(model.string() + ".json")) return files_of(model);
    return std::nullopt;
}

}  // namespace

std::vector<std::string> voice_folders() {
    std::vector<std::string> folders;
    if (const char* path = std::getenv("ETUDE_VOICE_PATH")) {
        std::string list = path;
        for (std::size_t b = 0; b <= list.size();) {
            std::size_t e = list.find(':', b);
            if (e == std::string::npos) e = list.size();
            if (e > b) folders.push_back(list.substr(b, e - b));
            b = e + 1;
        }
    }
    const char* xdg = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg)
        folders.push_back(std::string(xdg) + "/libetude/voices");
    else if (home && *home)
        folders.push_back(std::string(home) + "/.local/share/libetude/voices");
    return folders;
}

bool looks_like_path(const std::string& voice) {
    return voice.find('/') != std::string::npos || ends_with(voice, ".onnx") ||
           ends_with(voice, ".json");
}

std::optional<VoiceFiles> find_voice(const std::string& name_or_path) {
    if (looks_like_path(name_or_path)) {
        std::string model = name_or_path;
        if (ends_with(model, ".onnx.json")) model.resize(model.size() - 5);
        if (!ends_with(model, ".onnx"))
            throw Error(name_or_path +
                        ": a Piper voice is VOICE.onnx with VOICE.onnx.json beside it");
        VoiceFiles v = files_of(model);
        if (!is_file(v.config_path))
            throw Error(v.config_path + ": no such file (a Piper voice's config, beside " +
                        v.model_path + ")");
        return v;
    }
    if (name_or_path.empty()) return std::nullopt;
    for (const std::string& folder : voice_folders())
        if (auto v = find_in(folder, name_or_path)) return v;
    return std::nullopt;
}

VoiceFiles require_voice(const std::string& name_or_path) {
    if (auto v = find_voice(name_or_path)) return *v;
    std::string folders;
    for (const auto& f : voice_folders()) folders += (folders.empty() ? "" : ", ") + f;
    throw VoiceNotFound("no Piper voice '" + name_or_path + "' (looked in: " + folders + ")");
}

std::vector<VoiceFiles> list_voices() {
    std::vector<VoiceFiles> voices;
    std::set<std::string> seen;
    for (const std::string& folder : voice_folders()) {
        std::vector<fs::path> configs;
        for (const fs::path& entry : entries_of(folder)) {
            if (is_config(entry))
                configs.push_back(entry);
            else if (is_folder(entry))  // a voice in a folder of its own, one level down
                for (const fs::path& inner : entries_of(entry))
                    if (is_config(inner)) configs.push_back(inner);
        }
        std::sort(configs.begin(), configs.end());
        for (const fs::path& config : configs) {
            std::string model = config.string();
            model.resize(model.size() - 5);
            VoiceFiles v = files_of(model);
            if (seen.insert(v.name).second) voices.push_back(std::move(v));
        }
    }
    return voices;
}

}  // namespace etude::piper
