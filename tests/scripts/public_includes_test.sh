#!/usr/bin/env bash
# style.public_includes_can_fail: scripts/check-public-includes.sh run on a
# small tree of its own (the script, docs/Doxyfile and one edge file) must
# fail, naming the file and the header, when an edge includes a private
# header, and pass once that include is gone: a check that passes on the
# repository proves nothing unless it can also fail.
# Usage: public_includes_test.sh SOURCE_DIR
set -uo pipefail
source_dir=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/scripts" "$tree/docs"
cp "$source_dir/scripts/check-public-includes.sh" "$tree/scripts/"
cp "$source_dir/docs/Doxyfile" "$tree/docs/"
for edge in server speechd python/src examples cli audio-io; do mkdir -p "$tree/$edge"; done
printf '#include "engine/engine.h"\n#include "engine/streams/stream_core.h"\n' >"$tree/cli/bad.cpp"
printf '#include "engine/engine.h"\n' >"$tree/server/good.cpp"

out=$(bash "$tree/scripts/check-public-includes.sh" 2>&1)
status=$?
if [ $status -eq 0 ] || ! grep -qF "cli/bad.cpp includes engine/streams/stream_core.h" <<<"$out"; then
    echo "FAIL: a private include passed the check (exit $status):"
    echo "$out"
    exit 1
fi
if grep -qF "server/good.cpp" <<<"$out"; then
    echo "FAIL: the check named a file that includes only public headers:"
    echo "$out"
    exit 1
fi
printf '#include "engine/engine.h"\n' >"$tree/cli/bad.cpp"
if ! out=$(bash "$tree/scripts/check-public-includes.sh" 2>&1); then
    echo "FAIL: public includes only, and still the check failed:"
    echo "$out"
    exit 1
fi
echo "the check fails on a private include and passes without it"
