// etude info: what a LEF model file holds, after full validation.
#include <cstdio>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "engine/model_file.h"

namespace etude::cli {

int info_command(int argc, char** argv) {
    return run_command("info", [&] {
        CommandLine args("etude info MODEL.lef",
                         "Validates a LEF model file (checksums, bounds, shapes, metadata; see\n"
                         "docs/model-format.md) and prints its metadata and tensors.");
        args.positionals("MODEL.lef", "the model file to check");
        args.footer(
            "exit status: 0 valid, 1 the first problem found (named on standard error),\n"
            "2 usage error.\n");
        if (!args.parse(argc, argv)) return 0;
        if (args.positional().size() != 1) {
            std::fputs(args.help().c_str(), stderr);
            return 2;
        }
        const auto f = engine::read_model_file(args.positional()[0]);
        std::printf("metadata: %s\n", f.metadata_json.c_str());
        std::printf("tensors: %zu\n", f.tensors.size());
        std::uint64_t total = 0;
        for (const auto& t : f.tensors) {
            std::printf("  %-40s %s (", t.name.c_str(), t.dtype.c_str());
            for (std::size_t i = 0; i < t.shape.size(); ++i)
                std::printf("%s%llu", i ? ", " : "", static_cast<unsigned long long>(t.shape[i]));
            std::printf(")\n");
            total += t.elements;
        }
        std::printf("parameters: %llu\n", static_cast<unsigned long long>(total));
        return 0;
    });
}

}  // namespace etude::cli
