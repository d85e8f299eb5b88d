/// \file
/// What a front end may ask of text before a stream takes it (public API:
/// the servers refuse a request with nothing to speak, as `etude say` does).
#pragma once

#include <string_view>

namespace etude::engine {

/// True if `text` holds something other than white space and control
/// characters: text a stream would speak. The engine's sentence splitter
/// drops the pieces for which this is false.
bool has_speakable_text(std::string_view text);

}  // namespace etude::engine
