#include "speechd/reply_writer.h"

#include <unistd.h>

#include <cerrno>

namespace etude::speechd {

bool ReplyWriter::send(std::string_view message) {
    std::lock_guard lock(mu_);
    return send_locked(message);
}

bool ReplyWriter::send_locked(std::string_view message) {
    if (broken_.load()) return false;
    while (!message.empty()) {
        const ssize_t n = ::write(fd_, message.data(), message.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            // The server is gone (SIGPIPE is ignored, so this is EPIPE):
            // nothing more can be said, and the command loop ends on EOF.
            broken_.store(true);
            return false;
        }
        message.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

}  // namespace etude::speechd
