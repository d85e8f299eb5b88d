// One Wyoming client from connection to close: reads its events, answers
// describe and ping, runs its syntheses (one at a time, each on a thread of
// its own so the connection keeps reading: text chunks arrive and a
// disconnect cancels the speech while audio goes out), and closes the
// connection on a malformed frame, after an error event saying why.
#pragma once

#include "server/connection.h"
#include "server/server_context.h"

namespace etude::server {

// Runs until the client leaves, breaks the protocol, idles past the limit,
// or `stop` becomes true. Never throws.
void run_wyoming_session(Connection connection, const ServerContext& context,
                         const std::atomic<bool>& stop);

// The `info` answer to `describe`: one TTS program with every voice.
nlohmann::json wyoming_info(const VoiceCatalog& voices);

}  // namespace etude::server
