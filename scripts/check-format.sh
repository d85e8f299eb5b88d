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
bad=()
for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
    echo "not formatted with clang-format ($(clang-format --version | head -1)):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "${#files[@]} files formatted"
