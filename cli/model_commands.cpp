// etude info: what a LEF model file holds, after full validation.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "engine/models/lef_file.h"

namespace etude::cli {

int info_command(int argc, char** argv) {
    return run_command("info", [&] {
        Args args(argc, argv, 2, {}, {"-h", "--help"});
        if (args.flag("-h") || args.flag("--help") || args.positional().size() != 1) {
            std::fputs(
                "usage: etude info MODEL.lef\n\nValidates a LEF model file (checksums, bounds, "
                "shapes, "
                "metadata; see docs/model-format.md)\nand prints its metadata and tensors. Exit "
                "status 1 "
                "names the first problem found.\n",
                args.positional().size() == 1 || args.flag("-h") || args.flag("--help") ? stdout
                                                                                        : stderr);
            return args.flag("-h") || args.flag("--help") ? 0 : 2;
        }
        const auto f = engine::LefFile::open(args.positional()[0]);
        std::printf("metadata: %s\n", f.metadata_json().c_str());
        std::printf("tensors: %zu\n", f.tensors().size());
        std::uint64_t total = 0;
        for (const auto& t : f.tensors()) {
            std::printf("  %-40s %s (", t.name.c_str(),
                        t.dtype == engine::LefDtype::F32 ? "f32" : "f16");
            for (std::size_t i = 0; i < t.shape.size(); ++i)
                std::printf("%s%llu", i ? ", " : "", static_cast<unsigned long long>(t.shape[i]));
            std::printf(")\n");
            total += t.elements();
        }
        std::printf("parameters: %llu\n", static_cast<unsigned long long>(total));
        return 0;
    });
}

}  // namespace etude::cli
