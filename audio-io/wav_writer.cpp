#include "audio-io/wav_writer.h"

#include <sndfile.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/error.h"
#include "engine/partial_path.h"

namespace etude::audio_io {

WavWriter::WavWriter(std::string path, int sample_rate, WavFormat format,
                     std::uint64_t max_wav_bytes)
    : path_(std::move(path)),
      sample_rate_(sample_rate),
      format_(format),
      max_wav_bytes_(max_wav_bytes),
      pcm_(4096) {
    if (path_.empty()) throw Error("output path is empty");
    temp_path_ = partial_path(path_);
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

std::uint64_t WavWriter::data_bytes() const {
    return std::uint64_t(frames_) * (format_ == WavFormat::Pcm16 ? 2u : 4u);
}

void WavWriter::commit() {
    const int rc = sf_close(file_);
    file_ = nullptr;
    if (rc != 0) throw Error("closing '" + path_ + "' failed: " + sf_error_number(rc));
    if (data_bytes() > max_wav_bytes_) rewrite_as_rf64();
    if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
        throw Error("cannot write '" + path_ + "': " + std::strerror(errno));
    committed_ = true;
}

void WavWriter::rewrite_as_rf64() {
    // libsndfile's WAV writer puts the samples last, so they are the file's
    // final data_bytes(); the chunk id before them confirms it. (The chunk
    // sizes that wrapped are not read.)
    const std::uint64_t bytes = data_bytes();
    std::error_code ec;
    const std::uint64_t size = std::filesystem::file_size(temp_path_, ec);
    const auto fail = [&](const std::string& why) {
        return Error("writing '" + path_ + "' as RF64 (over WAV's 4 GiB) failed: " + why);
    };
    if (ec) throw fail(ec.message());
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(temp_path_.c_str(), "rb"),
                                                       &std::fclose);
    char id[4] = {};
    if (!in || size < bytes + 8 ||
        ::fseeko(in.get(), static_cast<off_t>(size - bytes - 8), SEEK_SET) != 0 ||
        std::fread(id, 1, 4, in.get()) != 4 || std::memcmp(id, "data", 4) != 0 ||
        ::fseeko(in.get(), static_cast<off_t>(size - bytes), SEEK_SET) != 0)
        throw fail("the samples are not where libsndfile's WAV writer puts them");

    const std::string rf64_path = temp_path_ + ".rf64";
    SF_INFO info{};
    info.samplerate = sample_rate_;
    info.channels = 1;
    info.format =
        SF_FORMAT_RF64 | (format_ == WavFormat::Pcm16 ? SF_FORMAT_PCM_16 : SF_FORMAT_FLOAT);
    SNDFILE* out = sf_open(rf64_path.c_str(), SFM_WRITE, &info);
    if (!out) throw fail(sf_strerror(nullptr));
    std::vector<char> buffer(std::size_t(1) << 20);
    std::string error;
    for (std::uint64_t left = bytes; left > 0 && error.empty();) {
        const std::size_t n =
            std::fread(buffer.data(), 1, std::min<std::uint64_t>(buffer.size(), left), in.get());
        if (n == 0)
            error = "the temporary WAV ended early";
        else if (sf_write_raw(out, buffer.data(), static_cast<sf_count_t>(n)) !=
                 static_cast<sf_count_t>(n))
            error = sf_strerror(out);
        left -= n;
    }
    const int rc = sf_close(out);
    if (error.empty() && rc != 0) error = sf_error_number(rc);
    if (error.empty() && std::rename(rf64_path.c_str(), temp_path_.c_str()) != 0)
        error = std::strerror(errno);
    if (!error.empty()) {
        std::remove(rf64_path.c_str());
        throw fail(error);
    }
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
