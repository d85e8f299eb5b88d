#include "audio-io/wav_writer.h"

#include <sndfile.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/error.h"

namespace etude::audio_io {

WavWriter::WavWriter(std::string path, int sample_rate, WavFormat format)
    : path_(std::move(path)), format_(format), pcm_(4096) {
    if (path_.empty()) throw Error("output path is empty");
    temp_path_ = path_ + ".partial-" + std::to_string(::getpid());
    SF_INFO info{};
    info.samplerate = sample_rate;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | (format == WavFormat::Pcm16 ? SF_FORMAT_PCM_16 : SF_FORMAT_FLOAT);
    file_ = sf_open(temp_path_.c_str(), SFM_WRITE, &info);
    if (!file_) {
        // Name the reason the OS gave, not libsndfile's generic message, when there is one.
        const int err = errno;
        std::string why = err ? std::strerror(err) : sf_strerror(nullptr);
        throw Error("cannot write '" + path_ + "': " + why);
    }
    // Clip instead of wrapping when floats slightly exceed [-1, 1].
    sf_command(file_, SFC_SET_CLIPPING, nullptr, SF_TRUE);
}

WavWriter::~WavWriter() {
    if (file_) sf_close(file_);
    if (!committed_) std::remove(temp_path_.c_str());
}

void WavWriter::write(std::span<const float> samples) {
    if (samples.empty()) return;
    sf_count_t n;
    if (format_ == WavFormat::Pcm16) {
        // Our own conversion (x32768, rounded, clipped) so a WAV holds exactly
        // the samples `say --raw` prints.
        std::size_t done = 0;
        n = 0;
        while (done < samples.size()) {
            const std::size_t k = std::min(pcm_.size(), samples.size() - done);
            float_to_pcm16(samples.subspan(done, k), std::span(pcm_).first(k));
            n += sf_writef_short(file_, pcm_.data(), static_cast<sf_count_t>(k));
            done += k;
        }
    } else {
        n = sf_writef_float(file_, samples.data(), static_cast<sf_count_t>(samples.size()));
    }
    if (n != static_cast<sf_count_t>(samples.size()))
        throw Error("writing '" + path_ + "' failed: " + sf_strerror(file_));
    frames_ += samples.size();
}

void float_to_pcm16(std::span<const float> in, std::span<short> out) {
    for (std::size_t i = 0; i < in.size(); ++i)
        out[i] = static_cast<short>(std::clamp(std::lrint(in[i] * 32768.0f), -32768L, 32767L));
}

void WavWriter::commit() {
    const int rc = sf_close(file_);
    file_ = nullptr;
    if (rc != 0) throw Error("closing '" + path_ + "' failed: " + sf_error_number(rc));
    if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
        throw Error("cannot write '" + path_ + "': " + std::strerror(errno));
    committed_ = true;
}

AudioFile read_audio_file(const std::string& path) {
    SF_INFO info{};
    SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
    if (!f) throw Error("cannot read '" + path + "': " + sf_strerror(nullptr));
    AudioFile out;
    out.sample_rate = info.samplerate;
    std::vector<float> frame(static_cast<std::size_t>(info.channels));
    out.samples.reserve(static_cast<std::size_t>(info.frames));
    while (sf_readf_float(f, frame.data(), 1) == 1) out.samples.push_back(frame[0]);
    sf_close(f);
    return out;
}

}  // namespace etude::audio_io
