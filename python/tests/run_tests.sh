#!/bin/sh
# Runs the Python package's tests (this folder) under BUILD/python-env, the
# fresh virtual environment scripts/bootstrap.sh test installs the wheel
# into; ctest's python.package. Run from a folder of the build, outside the
# source tree, so that `import libetude` is the installed wheel and never
# python/libetude of the checkout. Skips (77), saying why, when the
# environment could not be made (no PyPI); fails when the wheel did not build.
#   run_tests.sh BUILD_DIR [pytest arguments...]
build_dir="$1"; shift
here=$(cd "$(dirname "$0")" && pwd)
env="$build_dir/python-env"
if [ -f "$env/FAILED" ]; then
    echo "FAIL: $(cat "$env/FAILED")"
    exit 1
fi
if [ -f "$env/SKIPPED" ]; then
    echo "SKIP: $(cat "$env/SKIPPED")"
    exit 77
fi
if [ ! -x "$env/bin/python" ]; then
    echo "SKIP: no $env; scripts/bootstrap.sh test makes it"
    exit 77
fi
# An empty folder of its own: the build folder itself holds libetude.so (the
# C++ library), which `python -m` would import as the module libetude.
run_dir="$build_dir/python-tests-run"
mkdir -p "$run_dir" && cd "$run_dir" || exit 1
# An empty per-user voice folder, and no ETUDE_VOICE_PATH: the tests look
# voices up by name and expect the ones installed beside the wheel, which a
# folder's voice of the same name would shadow (scripts/bootstrap.sh demo
# links joe into ~/.local/share/libetude/voices).
mkdir -p "$run_dir/xdg-data" || exit 1
XDG_DATA_HOME="$run_dir/xdg-data" ETUDE_VOICE_PATH= PYTHONDONTWRITEBYTECODE=1 \
    exec "$env/bin/python" -m pytest "$here" --rootdir="$here" -p no:cacheprovider -q -rs "$@"
