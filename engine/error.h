// The error type thrown at the library's API edge. Never thrown on the audio
// path: real-time entry points report through counters only.
#pragma once

#include <stdexcept>
#include <string>

namespace etude {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace etude
