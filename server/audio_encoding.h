// The audio formats the HTTP endpoint streams, each made piece by piece as
// the samples arrive: "pcm" (16-bit little-endian mono, as Wyoming's
// audio-chunk), "wav" (the same after a 44-byte header whose sizes say
// "unknown length", 0xFFFFFFFF, as streamed WAV must), and through
// libsndfile "flac" (level 5 default, 16-bit), "mp3" (MPEG-1/2 Layer III,
// LAME's defaults) and "opus" (Ogg Opus, libopus's defaults); "aac" (ADTS)
// through FFmpeg's libraries where the build has them (aac_encoder.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
// The names make_audio_encoder knows, in OpenAI's order (mp3 first, the
// default), and joined for error messages: "mp3, opus, ...".
std::vector<std::string> audio_formats();
std::string audio_format_names();

// OpenAI's rate for pcm (documented as 24 kHz 16-bit), and ours for mp3,
// opus and aac as OpenAI makes them.
inline constexpr int kOpenAiRate = 24000;
// The rate a format is made at when the request names none: 24 kHz for
// pcm, mp3, opus and aac; nullopt (the voice's own) for wav and flac.
std::optional<int> default_audio_rate(std::string_view format);
// Why `format` cannot be made at `rate` (Opus, MPEG and AAC have fixed
// sets of rates; the engine makes 8000..192000 Hz); empty when it can.
std::string audio_rate_problem(std::string_view format, int rate);

// The 44-byte header of a streamed 16-bit mono WAV (sizes unknown).
std::string streaming_wav_header(int rate);

}  // namespace etude::server
