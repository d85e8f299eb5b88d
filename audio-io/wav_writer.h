// Writes mono audio to a WAV file through libsndfile, atomically: samples go
// to a temporary file beside the target, which replaces the target only on
// commit(). A failed or abandoned write leaves no partial file behind.
//
// WAV's sizes are 32-bit, so it holds at most 4 GiB of samples (27 hours at
// 22050 Hz in 16 bits, 3 hours at 48 kHz in float). libsndfile writes past
// that without a word and the header wraps: readers then see a short file.
// An output that grew past the limit is rewritten as RF64 (EBU Tech 3306,
// WAV with 64-bit sizes) when it is committed; anything smaller stays a
// plain WAV, byte for byte as before.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

struct sf_private_tag;

namespace etude::audio_io {

enum class WavFormat { Pcm16, Float32 };

class WavWriter {
  public:
    // The most sample bytes a WAV's data chunk can hold: its size field and
    // the RIFF size (header included) are 32-bit.
    static constexpr std::uint64_t kMaxWavDataBytes = 0xFFFFFFFFull - 4096;

    // Throws etude::Error naming the path and the reason if it cannot be
    // created. max_wav_bytes: past this many sample bytes the file is
    // committed as RF64 (tests lower it).
    WavWriter(std::string path, int sample_rate, WavFormat format = WavFormat::Pcm16,
              std::uint64_t max_wav_bytes = kMaxWavDataBytes);
    ~WavWriter();  // removes the temporary file unless commit() succeeded
    WavWriter(const WavWriter&) = delete;
    WavWriter& operator=(const WavWriter&) = delete;

    void write(std::span<const float> samples);  // throws etude::Error on a write error
    void commit();                               // closes and renames into place
    std::size_t frames_written() const { return frames_; }

  private:
    std::uint64_t data_bytes() const;
    void rewrite_as_rf64();  // temp_path_'s samples into an RF64 file at the same path

    std::string path_, temp_path_;
    int sample_rate_;
    WavFormat format_;
    std::uint64_t max_wav_bytes_;
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
