// A sound file read whole, for tests that check what a command wrote: its
// rate and its samples (mono), as floats or as 16-bit integers (libsndfile
// converts). A file that cannot be opened reads as rate 0 and no samples,
// which the test's own expectations then report.
#pragma once

#include <sndfile.h>

#include <filesystem>
#include <type_traits>
#include <vector>

namespace etude::test {

template <class Sample>
struct WavFile {
    int rate = 0;
    std::vector<Sample> samples;
};

template <class Sample>
WavFile<Sample> read_wav(const std::filesystem::path& path) {
    static_assert(std::is_same_v<Sample, float> || std::is_same_v<Sample, short>);
    SF_INFO info{};
    SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
    WavFile<Sample> w;
    if (!f) return w;
    w.rate = info.samplerate;
    w.samples.resize(static_cast<std::size_t>(info.frames));
    if constexpr (std::is_same_v<Sample, float>)
        sf_readf_float(f, w.samples.data(), info.frames);
    else
        sf_readf_short(f, w.samples.data(), info.frames);
    sf_close(f);
    return w;
}

}  // namespace etude::test
