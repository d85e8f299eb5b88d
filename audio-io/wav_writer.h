// Writes mono audio to a WAV file through libsndfile, atomically: samples go
// to a temporary file beside the target, which replaces the target only on
// commit(). A failed or abandoned write leaves no partial file behind.
#pragma once

#include <span>
#include <string>
#include <vector>

struct sf_private_tag;

namespace etude::audio_io {

enum class WavFormat { Pcm16, Float32 };

class WavWriter {
  public:
    // Throws etude::Error naming the path and the reason if it cannot be created.
    WavWriter(std::string path, int sample_rate, WavFormat format = WavFormat::Pcm16);
    ~WavWriter();  // removes the temporary file unless commit() succeeded
    WavWriter(const WavWriter&) = delete;
    WavWriter& operator=(const WavWriter&) = delete;

    void write(std::span<const float> samples);  // throws etude::Error on a write error
    void commit();                               // closes and renames into place
    std::size_t frames_written() const { return frames_; }

  private:
    std::string path_, temp_path_;
    WavFormat format_;
    std::vector<short> pcm_;
    sf_private_tag* file_ = nullptr;
    std::size_t frames_ = 0;
    bool committed_ = false;
};

// Float samples in [-1, 1) to 16-bit: x 32768, rounded to nearest, clipped.
void float_to_pcm16(std::span<const float> in, std::span<short> out);

// Reads a mono (or first channel of a) sound file as floats; throws etude::Error.
struct AudioFile {
    int sample_rate = 0;
    std::vector<float> samples;
};
AudioFile read_audio_file(const std::string& path);

}  // namespace etude::audio_io
