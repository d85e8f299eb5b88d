#include "speechd/line_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace etude::speechd {

std::optional<std::string> LineReader::next() {
    for (;;) {
        // Searching only the bytes not searched before keeps a long line
        // linear in its length.
        const std::size_t newline = buffer_.find('\n', std::max(start_, scanned_));
        if (newline == std::string::npos) scanned_ = buffer_.size();
        if (skipping_) {
            if (newline == std::string::npos) {
                start_ = buffer_.size();
            } else {
                start_ = newline + 1;
                skipping_ = false;
                continue;
            }
        } else if (newline == std::string::npos && buffer_.size() - start_ > kLongestLine) {
            std::string line = buffer_.substr(start_, kLongestLine);
            start_ = buffer_.size();
            skipping_ = true;
            return line;
        }
        if (newline != std::string::npos && !skipping_) {
            std::string line = buffer_.substr(start_, newline - start_);
            start_ = newline + 1;
            return line;
        }
        if (eof_) {
            if (start_ >= buffer_.size()) return std::nullopt;
            std::string line = buffer_.substr(start_);
            start_ = buffer_.size();
            return line;
        }
        // Drop what has been consumed before growing the buffer, so a long
        // message costs memory in proportion to its longest line only.
        buffer_.erase(0, start_);
        scanned_ -= std::min(scanned_, start_);
        start_ = 0;
        char chunk[65536];
        const ssize_t n = ::read(fd_, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            eof_ = true;
            continue;
        }
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

}  // namespace etude::speechd
