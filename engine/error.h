/// \file
/// The error type thrown at the library's API edge, and the one mapping from
/// what was thrown to the C API's status codes (engine/etude.h), which the C
/// API and the Python package both use. Never thrown on the audio path:
/// real-time entry points report through counters only.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

#include "engine/etude.h"

namespace etude {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// No voice of the name asked for: neither a built-in voice nor a Piper
/// voice in the voice folders (the message lists the folders searched).
class VoiceNotFound : public Error {
  public:
    using Error::Error;
};

/// An engine or stream used in a process forked after it was made: its
/// threads are not in this process (rt/fork_generation.h). Always
/// ETUDE_ERROR_INVALID_ARGUMENT, even where text was pushed: the text is
/// not at fault.
class MadeBeforeFork : public Error {
  public:
    using Error::Error;
};

/// A failure's status as the C API returns it and as the Python package
/// names its exception class: the one table both derive from.
struct FailureStatus {
    etude_status status;       ///< the C API's code (engine/etude.h)
    const char* c_name;        ///< its name in engine/etude.h
    const char* python_class;  ///< the class libetude raises for it
};

/// Every failure status, in etude_status order. The Python package's
/// exception classes take their codes from this table (libetude._errors).
inline constexpr FailureStatus kFailureStatuses[] = {
    {ETUDE_ERROR_INVALID_ARGUMENT, "ETUDE_ERROR_INVALID_ARGUMENT", "InvalidArgument"},
    {ETUDE_ERROR_INVALID_TEXT, "ETUDE_ERROR_INVALID_TEXT", "InvalidText"},
    {ETUDE_ERROR_INTERNAL, "ETUDE_ERROR_INTERNAL", "InternalError"},
};

/// The status of a failure `thrown` (a std::current_exception()): an
/// etude::Error is the caller's fault and gets `caller_fault`
/// (ETUDE_ERROR_INVALID_ARGUMENT, or ETUDE_ERROR_INVALID_TEXT where text
/// was being pushed); anything else is ETUDE_ERROR_INTERNAL. `message`
/// receives what was thrown's message ("unknown error" for what is not a
/// std::exception; left empty when there is no memory to copy it).
etude_status status_of(const std::exception_ptr& thrown, etude_status caller_fault,
                       std::string& message) noexcept;

}  // namespace etude
