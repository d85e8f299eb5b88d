// Phoneme ids the engine's Piper tests speak without espeak-ng: the
// reference sentence of tests/data/piper/reference.json (the ids every test
// voice takes) and a second one, the same phonemes in another order, kept
// in Piper's ^ _ (p _)* $ layout.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace etude::test {

inline std::vector<std::vector<std::int64_t>> piper_test_sentences() {
    std::ifstream in(std::string(ETUDE_TEST_DATA) + "/piper/reference.json");
    auto ids = nlohmann::json::parse(in)["phoneme_ids"].get<std::vector<std::int64_t>>();
    std::vector<std::int64_t> other(ids.begin() + 1, ids.end() - 1);
    std::reverse(other.begin(), other.end());
    other.insert(other.begin(), ids.front());
    other.push_back(ids.back());
    return {ids, other};
}

}  // namespace etude::test
