#!/bin/sh
# Runs a Python test under the virtual environment of PyPI peers
# (scripts/bootstrap.sh test makes BUILD/pyenv); skips (77), saying so,
# when that environment is missing.
py="$1"; shift
if [ ! -x "$py" ]; then
    echo "SKIP: no test Python at $py; run scripts/bootstrap.sh test (it makes BUILD/pyenv)"
    exit 77
fi
exec "$py" -B "$@"
