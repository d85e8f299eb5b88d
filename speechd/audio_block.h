// The server-audio event (705): 16-bit PCM framed and escaped for the pipe.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace etude::speechd {

/// Float samples to 16-bit signed PCM, scaled by `gain`, with the rounding
/// and clipping `etude say --raw` uses, so that at gain 1 (and below) both
/// give the same bytes. Past 1 (SET volume above 0), samples that would pass
/// 70% of full scale are eased towards it instead of clipped.
void to_pcm16(std::span<const float> in, float gain, std::vector<short>& out);

/// The whole 705 message for mono 16-bit little-endian `samples` at `rate`:
/// five header lines, the escaped payload after "705-AUDIO\0", then
/// "705 AUDIO". Bytes 0x0A and 0x7D of the payload become 0x7D, byte^0x20,
/// so that no payload byte can end the server's line read early.
std::string encode_audio_event(std::span<const short> samples, int rate);

}  // namespace etude::speechd
