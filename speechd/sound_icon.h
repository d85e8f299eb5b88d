// SOUND_ICON: a named sound file from the sound icon folder (Debian's
// sound-icons package puts them in /usr/share/sounds/sound-icons/), read
// whole through libsndfile and mixed to mono, to be sent as the message's
// audio. As speech-dispatcher's espeak-ng module does, a name with no
// readable file is spoken instead.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace etude::speechd {

struct SoundIcon {
    std::vector<float> samples;  // mono, -1..1
    int rate = 0;
};

/// The icon `name` in `folder`, or nothing (logged at level 3) when the
/// folder is empty, the name is not a plain file name (empty, "..", a '/'),
/// or the file is missing, not a regular file, over 32 MiB, not audio
/// libsndfile reads, longer than 10 s, or has more than 8 channels.
std::optional<SoundIcon> load_sound_icon(const std::string& folder, const std::string& name);

/// cap_let_recogn=icon: the cue before a capital letter spoken alone, a
/// 40 ms tone at 1.5 kHz, a tenth of full scale, faded in and out over
/// 5 ms (no click), at `rate` (the speech's, so one message has one rate).
std::vector<float> capital_cue(int rate);

}  // namespace etude::speechd
