// A program outside the tree, built against an installed LibEtude.
#include <cstdio>

#include "engine/engine.h"
#include "engine/etude.h"

int main() {
    etude::engine::Engine engine;
    auto stream = engine.create_stream();
    stream->push_text("Installed and linked.");
    stream->end_input();
    float block[256];
    std::size_t n, total = 0;
    while ((n = stream->read(block)) > 0) total += n;
    std::printf("%zu samples, C API %s\n", total, etude_version());
    return total > 8000 ? 0 : 1;
}
