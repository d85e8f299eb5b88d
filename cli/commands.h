// The etude subcommands. Each returns the process exit status:
// 0 success, 1 a runtime error (already reported), 2 a usage error.
#pragma once

namespace etude::cli {

int say_command(int argc, char** argv);
int devices_command(int argc, char** argv);
int voices_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int jack_command(int argc, char** argv);
int info_command(int argc, char** argv);
int vocode_command(int argc, char** argv);
int resynth_command(int argc, char** argv);
int phonemize_command(int argc, char** argv);
int serve_command(int argc, char** argv);

}  // namespace etude::cli
