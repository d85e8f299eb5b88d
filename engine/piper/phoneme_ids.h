// Phonemes to the ids a Piper voice's network takes, laid out as Piper's
// phonemes_to_ids does: "^", "_", then each phoneme followed by "_", then
// "$" (each marker's ids from the voice's map). A phoneme missing from the
// map is skipped and counted, as Piper does (it logs a warning).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/piper/voice_config.h"

namespace etude::piper {

struct PhonemeIds {
    std::vector<std::int64_t> ids;
    std::size_t missing = 0;                    // phonemes skipped
    std::vector<std::string> missing_phonemes;  // each distinct one, in order of appearance
    // Per phoneme, the index of its first id (a skipped one: of the id after it).
    std::vector<std::size_t> phoneme_starts;
};

PhonemeIds phonemes_to_ids(const std::vector<std::string>& phonemes, const VoiceConfig& voice);

// Ids from elsewhere (--json-input's "phoneme_ids"): each must be in
// 0..num_symbols-1. Throws etude::Error naming the voice and the first bad id.
void check_phoneme_ids(const std::vector<std::int64_t>& ids, const VoiceConfig& voice);

// Merges adjacent phonemes that form one of the voice's vowel clusters
// ("a" "ɪ" -> "aɪ"), the longest first, as Piper does.
std::vector<std::string> merge_vowel_clusters(const std::vector<std::string>& phonemes,
                                              const VoiceConfig& voice);

}  // namespace etude::piper
