// OpenAI's speech stream events (POST /v1/audio/speech with
// "stream_format": "sse"): the audio as it is made, each piece Base64 in a
// `speech.audio.delta` event, then one `speech.audio.done`, as server-sent
// events (text/event-stream: a `data:` line and a blank line each). The
// pieces are the encoded reply's (the response_format's bytes: pcm, wav,
// mp3...), each Base64 on its own, so that a client decodes each delta
// as it comes and joins the bytes.
#pragma once

#include <string>
#include <string_view>

namespace etude::server {

// RFC 4648 Base64 (the standard alphabet, padded with '=').
std::string base64(std::string_view bytes);

// `data: {"type":"speech.audio.delta","audio":"<Base64 of bytes>"}` and a
// blank line.
std::string speech_audio_delta_event(std::string_view bytes);
// `data: {"type":"speech.audio.done","usage":{...}}` and a blank line. The
// usage counts tokens of OpenAI's models; the engine has none, so all three
// are 0 (the fields are required).
std::string speech_audio_done_event();

}  // namespace etude::server
