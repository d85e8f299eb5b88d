#!/usr/bin/env bash
# Fails when a tracked C, C++ or CUDA file differs from what
# clang-format makes of it with the repository's .clang-format. The test
# command runs it (ctest: style.clang_format); fix with
#   git ls-files '*.h' '*.cpp' '*.c' '*.cu' | xargs clang-format -i
# (.cl files are left out: clang-format has no OpenCL C mode and formats
# them by guesswork, ignoring this repository's column limit.)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
    echo "clang-format not found: install it (scripts/bootstrap.sh test does)"
    exit 77
fi
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.c' '*.cu')
# One clang-format for every file (a process per file was 15 s of CPU, most
# of it starting clang-format 500 times; one is 2 s); its errors name each
# file that differs, once per difference.
if errors=$(clang-format --dry-run -Werror "${files[@]}" 2>&1 >/dev/null); then
    echo "${#files[@]} files formatted"
    exit 0
fi
mapfile -t bad < <(printf '%s\n' "$errors" | sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if [ ${#bad[@]} -eq 0 ]; then
    # Not a formatting difference (an unreadable file, say): clang-format's own words.
    printf '%s\n' "$errors"
    exit 1
fi
echo "not formatted with clang-format ($(clang-format --version | head -1)):"
printf '  %s\n' "${bad[@]}"
exit 1
