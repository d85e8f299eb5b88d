// sd_etude: LibEtude as a speech-dispatcher output module. The server
// starts it with its configuration file as the only argument and talks to
// it over standard input and output (see speechd/README.md).
#include <unistd.h>

#include <csignal>
#include <string>

#include "speechd/line_reader.h"
#include "speechd/module_config.h"
#include "speechd/protocol.h"
#include "speechd/reply_writer.h"

int main(int argc, char** argv) {
    using namespace etude::speechd;
    // A server that goes away must not kill us in the middle of a write:
    // the write fails instead and the loop ends at the end of input.
    std::signal(SIGPIPE, SIG_IGN);
    const ModuleConfig config = read_module_config(argc > 1 ? argv[1] : "");
    LineReader in(STDIN_FILENO);
    ReplyWriter out(STDOUT_FILENO);
    Protocol protocol(in, out, config);
    return protocol.run();
}
