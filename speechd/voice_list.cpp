#include "speechd/voice_list.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "engine/engine.h"
#include "speechd/log.h"

namespace etude::speechd {

namespace {

// LIST VOICES fields are TAB-separated lines: neither may appear in one.
std::string field(std::string s) {
    std::replace_if(
        s.begin(), s.end(), [](char c) { return c == '\t' || c == '\n'; }, ' ');
    return s.empty() ? "none" : s;
}

bool is_builtin(const std::string& name) {
    const auto& b = engine::Engine::voices();
    return std::find(b.begin(), b.end(), name) != b.end();
}

}  // namespace

VoiceList::VoiceList(const ModuleConfig& config) {
    for (const auto& b : engine::Engine::voices())
        voices_.push_back({b, "en", "none", b, "", "", false});
    std::vector<std::string> piper = config.piper_voices;
    if (!is_builtin(config.default_voice) &&
        std::find(piper.begin(), piper.end(), config.default_voice) == piper.end())
        piper.insert(piper.begin(), config.default_voice);
    // Then every voice installed in the voice folders, as `etude voices`
    // lists them, so that Orca's menu offers them without configuration.
    const std::size_t configured = piper.size();
    for (auto& path : engine::Engine::installed_voices()) piper.push_back(std::move(path));
    default_name_ = "slt";
    for (std::size_t i = 0; i < piper.size(); ++i) {
        const std::string& p = piper[i];
        try {
            const engine::VoiceInfo info = engine::Engine::describe_voice(p);
            if (find(field(info.name))) continue;  // configured, or in an earlier folder
            std::string language = info.language;
            std::replace(language.begin(), language.end(), '_', '-');
            voices_.push_back(
                {field(info.name), field(language), "none", "", p, "", i < configured});
            if (p == config.default_voice) default_name_ = voices_.back().name;
            if (info.speakers.size() > 1)
                for (const auto& s : info.speakers)
                    voices_.push_back(
                        {field(info.name + "#" + s), field(language), field(s), "", p, s, false});
        } catch (const std::exception& e) {
            log_line(1, "Piper voice '" + p + "' left out: " + e.what());
        }
    }
    if (is_builtin(config.default_voice)) default_name_ = config.default_voice;
}

const ModuleVoice* VoiceList::find(const std::string& name) const {
    for (const auto& v : voices_)
        if (v.name == name) return &v;
    return nullptr;
}

const ModuleVoice& VoiceList::default_voice() const {
    const ModuleVoice* v = find(default_name_);
    return v ? *v : voices_.front();
}

std::string VoiceList::list_reply(const std::string& language, const std::string& variant) const {
    const auto same = [](std::string_view a, std::string_view b) {
        return a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
                   return std::tolower(static_cast<unsigned char>(x)) ==
                          std::tolower(static_cast<unsigned char>(y));
               });
    };
    std::string reply;
    for (const auto& v : voices_) {
        if (!language.empty() && !same(language, v.language) &&
            !same(language, std::string_view(v.language).substr(0, v.language.find('-'))))
            continue;
        if (!language.empty() && !variant.empty() && !same(variant, v.variant)) continue;
        reply += "200-" + v.name + "\t" + v.language + "\t" + v.variant + "\n";
    }
    if (reply.empty()) return "304 CANT LIST VOICES\n";
    reply += "200 OK VOICE LIST SENT\n";
    return reply;
}

}  // namespace etude::speechd
