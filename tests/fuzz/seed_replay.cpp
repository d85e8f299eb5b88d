// A libFuzzer target without libFuzzer: runs its LLVMFuzzerTestOneInput once
// on each file of the folders given, in name order, so that the seeds of
// tests/fuzz/seeds/ run in the ordinary test suite with any compiler
// (tests/CMakeLists.txt, fuzz.seeds.*). A seed that crashes or trips a
// target's check (std::abort) fails the test; so does a folder without
// seeds, which would otherwise pass having checked nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> seeds;
    for (int a = 1; a < argc; ++a)
        for (const auto& entry : fs::directory_iterator(argv[a]))
            if (entry.is_regular_file()) seeds.push_back(entry.path());
    std::sort(seeds.begin(), seeds.end());
    for (const fs::path& seed : seeds) {
        std::ifstream in(seed, std::ios::binary);
        const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
        std::printf("%s (%zu bytes)\n", seed.filename().c_str(), bytes.size());
        std::fflush(stdout);  // named before it runs: a crash names its seed
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("%zu seeds, none failed\n", seeds.size());
    return seeds.empty() ? 1 : 0;
}
