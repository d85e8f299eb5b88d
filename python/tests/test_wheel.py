"""The installed wheel is a manylinux wheel that carries espeak-ng and its
data, and a Piper voice speaks from that data alone (docs/python.md, "What
the wheel carries")."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import libetude
from conftest import HANG_SECONDS

PACKAGE = Path(libetude.__file__).resolve().parent
DATA = PACKAGE / "espeak-ng-data"
TEXT = "Hello there, from the wheel."
SEED = 7


def wheel_tags() -> list[str]:
    wheel = importlib.metadata.distribution("libetude").read_text("WHEEL") or ""
    return [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]


def bundled_espeak() -> Path:
    """The espeak-ng library auditwheel copied into the wheel."""
    libs = sorted((PACKAGE.parent / "libetude.libs").glob("libespeak-ng*.so*"))
    assert len(libs) == 1, f"expected one libespeak-ng in libetude.libs, found {libs}"
    return libs[0]


def test_the_installed_wheel_is_manylinux_for_this_machine():
    tags = wheel_tags()
    assert tags, "the installed libetude has no Tag in its WHEEL file"
    for tag in tags:
        plat = tag.rsplit("-", 1)[1]
        assert re.fullmatch(r"manylinux_\d+_\d+_" + platform.machine(), plat), (
            f"{tag}: not a manylinux tag for {platform.machine()} "
            "(scripts/bootstrap.sh repair_wheel makes one)")


def test_the_wheel_carries_espeak_ng_and_its_data():
    bundled_espeak()
    assert (DATA / "phontab").is_file() and (DATA / "en_dict").is_file(), DATA
    assert libetude._espeak_data.FOLDER == str(DATA)


def test_a_data_folder_without_phontab_is_refused_naming_it(tmp_path):
    with pytest.raises(libetude.InvalidArgument, match="not an espeak-ng-data folder"):
        libetude._native.set_espeak_data(str(tmp_path))


def system_data_folders() -> list[str]:
    """Every espeak-ng-data folder the bundled espeak-ng could find without
    the package naming one: the path built into the library (read from its
    bytes) and the usual install places, where they exist."""
    built_in = re.findall(rb"(/[\x21-\x7e]*/espeak-ng-data)\0", bundled_espeak().read_bytes())
    assert built_in, f"{bundled_espeak()}: no espeak-ng-data path built in"
    places = {p.decode() for p in built_in}
    places |= {"/usr/share/espeak-ng-data", "/usr/local/share/espeak-ng-data"}
    places |= {str(p) for p in Path("/usr/lib").glob("*/espeak-ng-data")}
    return sorted(p for p in places if os.path.isdir(p))


# Run in a mount namespace of its own with HIDE's folders covered by empty
# ones: asserts they look empty, then speaks TEXT with the voice argv[1] and
# saves the samples to argv[2], or prints the engine's error.
CHILD = """
import os, sys
import numpy as np
for folder in os.environ["HIDE"].split(os.pathsep):
    assert os.listdir(folder) == [], folder + " is not hidden"
import libetude
try:
    with libetude.Engine(preload=[]) as engine:
        audio = engine.synthesize(sys.argv[3], voice=sys.argv[1], seed=int(sys.argv[4]))
except libetude.EtudeError as e:
    print("EtudeError:", e)
    sys.exit(3)
np.save(sys.argv[2], audio)
"""


def speak_with_folders_hidden(hide: list[str], voice: str, out: Path, home: Path):
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("no unshare (util-linux) to hide the system's espeak-ng data")
    cmd = [unshare, "--map-root-user", "--mount", "sh", "-c",
           'for d in "$@"; do mount -t tmpfs none "$d" || exit 2; done; exec "$PY" -c "$CHILD" '
           '"$VOICE" "$OUT" "$TEXT" "$SEED"', "sh", *hide]
    env = dict(os.environ, HOME=str(home), HIDE=os.pathsep.join(hide), PY=sys.executable,
               CHILD=CHILD, VOICE=voice, OUT=str(out), TEXT=TEXT, SEED=str(SEED))
    env.pop("ESPEAK_DATA_PATH", None)
    probe = subprocess.run([unshare, "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a mount namespace here (unshare --map-root-user --mount: "
                    f"{probe.stderr.decode().strip()}) to hide the system's espeak-ng data")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_SECONDS)


def test_a_piper_voice_speaks_from_the_wheels_data_with_the_systems_hidden(
        engine, joe_model, tmp_path):
    hide = system_data_folders()
    done = speak_with_folders_hidden(hide, joe_model, tmp_path / "hidden.npy", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = engine.synthesize(TEXT, voice=joe_model, seed=SEED)
    assert np.array_equal(np.load(tmp_path / "hidden.npy"), expected)
    # The control: with the package's copy hidden too, espeak-ng finds no
    # data at all, so the run above spoke from the package's.
    done = speak_with_folders_hidden(hide + [str(DATA)], joe_model, tmp_path / "none.npy",
                                     tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "espeak-ng could not start" in done.stdout, done.stdout + done.stderr
