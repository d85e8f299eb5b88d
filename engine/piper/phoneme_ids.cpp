#include "engine/piper/phoneme_ids.h"

#include <algorithm>

#include "engine/error.h"

namespace etude::piper {

PhonemeIds phonemes_to_ids(const std::vector<std::string>& phonemes, const VoiceConfig& voice) {
    const auto& bos = voice.ids_of("^");
    const auto& pad = voice.ids_of("_");
    const auto& eos = voice.ids_of("$");
    PhonemeIds out;
    out.ids.reserve(2 * phonemes.size() + bos.size() + pad.size() + eos.size());
    out.ids.insert(out.ids.end(), bos.begin(), bos.end());
    out.ids.insert(out.ids.end(), pad.begin(), pad.end());
    out.phoneme_starts.reserve(phonemes.size());
    for (const std::string& p : phonemes) {
        out.phoneme_starts.push_back(out.ids.size());
        auto it = voice.phoneme_id_map.find(p);
        if (it == voice.phoneme_id_map.end()) {
            ++out.missing;
            if (std::find(out.missing_phonemes.begin(), out.missing_phonemes.end(), p) ==
                out.missing_phonemes.end())
                out.missing_phonemes.push_back(p);
            continue;
        }
        out.ids.insert(out.ids.end(), it->second.begin(), it->second.end());
        out.ids.insert(out.ids.end(), pad.begin(), pad.end());
    }
    out.ids.insert(out.ids.end(), eos.begin(), eos.end());
    // The config reader checked the map; this guards a config built in code.
    check_phoneme_ids(out.ids, voice);
    return out;
}

void check_phoneme_ids(const std::vector<std::int64_t>& ids, const VoiceConfig& voice) {
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= voice.num_symbols)
            throw Error(voice.path + ": phoneme id " + std::to_string(ids[i]) + " (at " +
                        std::to_string(i) + ") is out of range: num_symbols is " +
                        std::to_string(voice.num_symbols));
}

std::vector<std::string> merge_vowel_clusters(const std::vector<std::string>& phonemes,
                                              const VoiceConfig& voice) {
    if (voice.vowel_clusters.empty()) return phonemes;
    std::size_t longest = 0;
    for (const auto& c : voice.vowel_clusters) longest = std::max(longest, c.size());
    std::vector<std::string> out;
    for (std::size_t i = 0; i < phonemes.size();) {
        std::size_t matched = 0;
        for (std::size_t n = std::min(longest, phonemes.size() - i); n >= 2 && !matched; --n)
            for (const auto& c : voice.vowel_clusters)
                if (c.size() == n && std::equal(c.begin(), c.end(), phonemes.begin() + i)) {
                    matched = n;
                    break;
                }
        if (matched) {
            std::string joined;
            for (std::size_t k = 0; k < matched; ++k) joined += phonemes[i + k];
            out.push_back(std::move(joined));
            i += matched;
        } else {
            out.push_back(phonemes[i++]);
        }
    }
    return out;
}

}  // namespace etude::piper
