// "aac" for the HTTP endpoint: AAC-LC in ADTS frames (audio/aac), as
// OpenAI's speech endpoint sends it, made by FFmpeg's own AAC encoder
// (libavcodec) and framed by its ADTS muxer (libavformat). ADTS repeats
// the stream's configuration in every frame, so a client may start
// decoding anywhere and nothing has to be rewritten at the end: it streams.
#pragma once

#include <memory>

#include "server/audio_encoding.h"

namespace etude::server {

// Whether this build has it (libavcodec and libavformat were found).
bool aac_available();

// nullptr when this build has no AAC encoder.
std::unique_ptr<AudioEncoder> make_aac_encoder(AudioEncoder::Writer write);

}  // namespace etude::server
