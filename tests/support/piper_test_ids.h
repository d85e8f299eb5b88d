// Phoneme ids the engine's Piper tests speak without espeak-ng: the
// reference sentence of tests/data/piper/reference.json (the ids every test
// voice takes), a second one, the same phonemes in another order, kept
// in Piper's ^ _ (p _)* $ layout, and sentences of any length cut from or
// repeating the reference; and the test voices' names.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_data.h"

namespace etude::test {

// The test voices of tests/data/piper, every size and the four-speaker one.
inline constexpr const char* kPiperTestVoices[] = {"test_x_low", "test_low", "test_medium",
                                                   "test_high", "test_medium_multi"};

inline std::vector<std::int64_t> piper_reference_ids() {
    std::ifstream in(etude::test::test_data_dir() + "/piper/reference.json");
    return nlohmann::json::parse(in)["phoneme_ids"].get<std::vector<std::int64_t>>();
}

// `n` ids: the reference sentence itself at its length, ids from its fourth
// on below it, the reference repeated (and cut) above it.
inline std::vector<std::int64_t> piper_ids_of_length(std::size_t n) {
    const auto ref = piper_reference_ids();
    if (n == ref.size()) return ref;
    if (n + 3 <= ref.size()) return {ref.begin() + 3, ref.begin() + 3 + std::ptrdiff_t(n)};
    std::vector<std::int64_t> longer;
    while (longer.size() < n) longer.insert(longer.end(), ref.begin(), ref.end());
    longer.resize(n);
    return longer;
}

inline std::vector<std::vector<std::int64_t>> piper_test_sentences() {
    std::ifstream in(etude::test::test_data_dir() + "/piper/reference.json");
    auto ids = nlohmann::json::parse(in)["phoneme_ids"].get<std::vector<std::int64_t>>();
    std::vector<std::int64_t> other(ids.begin() + 1, ids.end() - 1);
    std::reverse(other.begin(), other.end());
    other.insert(other.begin(), ids.front());
    other.push_back(ids.back());
    return {ids, other};
}

}  // namespace etude::test
