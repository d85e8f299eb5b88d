#include "speechd/sound_icon.h"

#include <sndfile.h>
#include <sys/stat.h>

#include <cmath>
#include <memory>
#include <new>

#include "speechd/log.h"

namespace etude::speechd {

namespace {

// A screen reader's icon is a click or a chime; a long file is not one.
// The file's size and channels are bounded too: a compressed file's header
// may promise any number of frames, and each channel is a buffer.
constexpr sf_count_t kLongestIconSeconds = 10;
constexpr off_t kLargestIconBytes = 32 << 20;
constexpr int kMostIconChannels = 8;

}  // namespace

std::optional<SoundIcon> load_sound_icon(const std::string& folder, const std::string& name) {
    if (folder.empty()) return std::nullopt;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
        log_line(3, "SOUND_ICON '" + name + "' is not a file name: spoken");
        return std::nullopt;
    }
    const std::string path = folder + (folder.back() == '/' ? "" : "/") + name;
    // A plain file (a FIFO would block the protocol in sf_open) of bounded size.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kLargestIconBytes) {
        log_line(
            3, "SOUND_ICON '" + name + "': no icon file of at most 32 MiB at " + path + ": spoken");
        return std::nullopt;
    }
    SF_INFO info{};
    std::unique_ptr<SNDFILE, decltype(&sf_close)> file(sf_open(path.c_str(), SFM_READ, &info),
                                                       &sf_close);
    if (!file) {
        log_line(3, "SOUND_ICON '" + name + "': no icon at " + path + " (" + sf_strerror(nullptr) +
                        "): spoken");
        return std::nullopt;
    }
    if (info.channels < 1 || info.channels > kMostIconChannels || info.samplerate < 1000 ||
        info.samplerate > 192000 || info.frames > kLongestIconSeconds * info.samplerate) {
        log_line(3, "SOUND_ICON '" + name + "': " + path + " is not a short sound: spoken");
        return std::nullopt;
    }
    std::vector<float> interleaved;
    try {
        interleaved.resize(static_cast<std::size_t>(info.frames * info.channels));
    } catch (const std::bad_alloc&) {
        log_line(1, "SOUND_ICON '" + name + "': no memory for " + path + ": spoken");
        return std::nullopt;
    }
    const sf_count_t got = sf_readf_float(file.get(), interleaved.data(), info.frames);
    SoundIcon icon;
    icon.rate = info.samplerate;
    icon.samples.resize(static_cast<std::size_t>(got > 0 ? got : 0));
    for (std::size_t f = 0; f < icon.samples.size(); ++f) {
        float sum = 0;
        for (int c = 0; c < info.channels; ++c)
            sum += interleaved[f * static_cast<std::size_t>(info.channels) +
                               static_cast<std::size_t>(c)];
        icon.samples[f] = sum / static_cast<float>(info.channels);
    }
    if (icon.samples.empty()) return std::nullopt;
    return icon;
}

std::vector<float> capital_cue(int rate) {
    const std::size_t n = static_cast<std::size_t>(rate * 0.040);
    const std::size_t fade = static_cast<std::size_t>(rate * 0.005);
    std::vector<float> cue(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t edge = std::min(i, n - 1 - i);
        const double ramp =
            edge >= fade ? 1.0 : 0.5 - 0.5 * std::cos(M_PI * double(edge) / double(fade));
        cue[i] = static_cast<float>(0.1 * ramp * std::sin(2.0 * M_PI * 1500.0 * double(i) / rate));
    }
    return cue;
}

}  // namespace etude::speechd
