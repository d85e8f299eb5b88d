// Running the `etude` program from a test: exit status, stdout and stderr,
// with a scratch folder per test process. Shared by the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace etude::test {

namespace fs = std::filesystem;

struct CliRun {
    int status = -1;
    std::string out, err;
};

inline std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline fs::path tmpdir() {
    static const fs::path dir = [] {
        fs::path d = fs::path(ETUDE_TEST_TMP) / ("cli-" + std::to_string(::getpid()));
        fs::create_directories(d);
        return d;
    }();
    return dir;
}

inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs etude with `args` (already shell-quoted where needed) and `input` on
// stdin; `env`, if given, is VAR=VALUE words set for it alone.
inline CliRun run_etude(const std::string& args, const std::string& input = "",
                        const std::string& env = "") {
    const fs::path in = tmpdir() / "stdin", out = tmpdir() / "stdout", err = tmpdir() / "stderr";
    std::ofstream(in, std::ios::binary) << input;
    const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(ETUDE_CLI_PATH) +
                            " " + args + " < " + in.string() + " > " + out.string() + " 2> " +
                            err.string();
    CliRun r;
    const int rc = std::system(cmd.c_str());
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

}  // namespace etude::test
