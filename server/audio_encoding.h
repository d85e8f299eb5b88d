// The audio formats the HTTP endpoint streams, each made piece by piece as
// the samples arrive: "pcm" (16-bit little-endian mono, as Wyoming's
// audio-chunk), "wav" (the same after a 44-byte header whose sizes say
// "unknown length", 0xFFFFFFFF, as streamed WAV must) and "flac" (through
// libsndfile, level 5 default, 16-bit).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace etude::server {

class AudioEncoder {
  public:
    // `write` takes each piece of the encoded stream; false: the client is gone.
    using Writer = std::function<bool(std::string_view)>;
    virtual ~AudioEncoder() = default;
    virtual bool start(int rate) = 0;
    virtual bool add(std::span<const float> samples) = 0;
    virtual bool finish() = 0;
    // "audio/wav", ...
    virtual const char* content_type() const = 0;
};

// nullptr for an unknown format name.
std::unique_ptr<AudioEncoder> make_audio_encoder(std::string_view format,
                                                 AudioEncoder::Writer write);
// The names make_audio_encoder knows, for error messages: "wav, pcm, flac".
const char* audio_format_names();

// The 44-byte header of a streamed 16-bit mono WAV (sizes unknown).
std::string streaming_wav_header(int rate);

}  // namespace etude::server
