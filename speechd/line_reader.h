// Lines from a file descriptor (the server's pipe), read with read(2).
#pragma once

#include <optional>
#include <string>

namespace etude::speechd {

/// Splits what arrives on `fd` into lines. stdio's buffering is avoided on
/// purpose: the command loop must see STOP as soon as its line arrives,
/// whatever the speaking thread is doing.
class LineReader {
  public:
    explicit LineReader(int fd) : fd_(fd) {}
    /// The next line without its '\n'; nullopt at end of input or on a read
    /// error (the server has gone). A last line without '\n' is returned too.
    /// A line longer than kLongestLine is cut there and the rest of it
    /// dropped, so that input without newlines cannot take all memory.
    std::optional<std::string> next();

    static constexpr std::size_t kLongestLine = 64u << 20;

  private:
    int fd_;
    std::string buffer_;
    std::size_t start_ = 0;    // where the unread part of buffer_ begins
    std::size_t scanned_ = 0;  // buffer_ before this holds no '\n' past start_
    bool eof_ = false;
    bool skipping_ = false;  // dropping the rest of a line that was too long
};

}  // namespace etude::speechd
