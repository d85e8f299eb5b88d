"""Bad input raises an EtudeError with the engine's (the CLI's) message, or
is spoken; never a crash or a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import libetude
from conftest import CHECKOUT, TEST_DATA, assert_same_audio, hang_bound, run_bounded


def test_the_error_classes_are_the_engines_table():
    """Each failure status of engine/error.h's table has its class, with the
    table's code, and the numbers are those of engine/etude.h's enum."""
    assert issubclass(libetude.EtudeError, RuntimeError)
    table = libetude._native.FAILURE_STATUSES
    assert [python_class for _, _, python_class in table] == [
        "InvalidArgument", "InvalidText", "InternalError"]
    header = (CHECKOUT / "engine" / "etude.h").read_text()
    for code, c_name, python_class in table:
        cls = getattr(libetude, python_class)
        assert issubclass(cls, libetude.EtudeError)
        assert (cls.code, cls.c_name) == (code, c_name)
        assert re.search(rf"\b{c_name}\s*=\s*{code}(?![0-9])", header), c_name


def test_the_same_failures_give_the_same_codes_and_messages_in_c_and_python(engine):
    """The C API (through ctypes, in a process of its own) and the package
    turn the same failures into the same status and message."""
    library = os.environ.get("ETUDE_C_LIBRARY", "")
    if not library or not os.path.exists(library):
        pytest.skip("ETUDE_C_LIBRARY does not name libetude.so (ctest sets it)")
    script = Path(__file__).with_name("c_failures.py")
    done = subprocess.run([sys.executable, str(script), library], capture_output=True,
                          text=True, timeout=hang_bound(60))
    assert done.returncode == 0, done.stderr
    in_c = json.loads(done.stdout)

    def failure(call) -> list:
        with pytest.raises(libetude.EtudeError) as e:
            call()
        return [e.value.code, str(e.value)]

    in_python = {"rate": failure(lambda: engine.stream(voice="slt", sample_rate=1))}
    with engine.stream(voice="slt", sample_rate=16000) as s:
        in_python["prosody"] = failure(lambda: s.set_prosody(rate=100))
        in_python["utf8"] = failure(lambda: s.push_text(b"caf\xff. "))
        s.push_text(b"Caf\xc3")
        in_python["end_input"] = failure(s.end_input)
    assert in_python == in_c
    assert {code for code, _ in in_c.values()} == {
        libetude.InvalidArgument.code, libetude.InvalidText.code}


def test_unknown_voice_says_what_etude_says(engine, etude_bin, tmp_path):
    with pytest.raises(libetude.InvalidArgument) as e:
        engine.stream(voice="no-such-voice")
    cli = subprocess.run(
        [etude_bin, "say", "--voice", "no-such-voice", "Hi.", "-o", str(tmp_path / "x.wav")],
        capture_output=True, text=True, timeout=hang_bound(60),
    )
    assert cli.returncode == 1
    assert cli.stderr.strip() == f"etude say: {e.value}"
    with pytest.raises(libetude.InvalidArgument, match="unknown voice"):
        engine.synthesize("Hi.", voice="")


def test_a_missing_voice_file_names_the_file(engine, tmp_path):
    with pytest.raises(libetude.InvalidArgument, match="no such file"):
        engine.stream(voice=str(tmp_path / "missing.onnx"))


def test_lone_surrogate_is_invalid_text(engine):
    with pytest.raises(libetude.InvalidText, match="surrogate U\\+D800"):
        engine.synthesize("Hello \ud800 world.")
    with engine.stream() as s:
        with pytest.raises(libetude.InvalidText):
            s.push_text("a\udcff")
        s.push_text("Still usable.")  # the stream is unharmed
        s.end_input()
        assert sum(b.size for b in s) > 0


def test_invalid_utf8_bytes_are_invalid_text_with_the_engines_message(engine):
    with engine.stream() as s:
        with pytest.raises(libetude.InvalidText, match="UTF-8"):
            s.push_text(b"caf\xff\xfe. ")


def test_a_piece_ending_inside_a_character_is_invalid_at_end_input(engine):
    with engine.stream() as s:
        s.push_text(b"Caf\xc3")  # the first byte of a two-byte character
        with pytest.raises(libetude.InvalidText):
            s.end_input()


@pytest.mark.parametrize("rate", [-16000, 7999, 192001, float("nan")])
def test_bad_rates_are_invalid_arguments(engine, rate):
    with pytest.raises(libetude.InvalidArgument, match="sample_rate|rate"):
        engine.stream(voice="slt", sample_rate=rate)


def test_an_unknown_precision_is_refused_as_the_cli_refuses_it():
    with pytest.raises(libetude.InvalidArgument,
                       match=r"unknown precision 'fp16' \(choose fp32 or tf32\)"):
        libetude.Engine(preload=[], precision="fp16")


def test_piper_options_on_a_builtin_voice_are_refused(engine):
    with pytest.raises(libetude.InvalidArgument, match="seed applies to Piper voices"):
        engine.stream(voice="slt", seed=3)
    with pytest.raises(libetude.InvalidArgument, match="latency"):
        engine.stream(voice="slt", latency_ms=1)


def test_a_megabyte_of_text_is_spoken_without_hanging(engine):
    text = "All work and no play makes a dull voice. " * (1_000_000 // 40)
    assert len(text) >= 999_000

    def speak_the_start():
        with engine.stream(voice="slt") as s:
            t0 = time.perf_counter()
            s.push_text(text)
            s.end_input()
            pushed = time.perf_counter() - t0
            got = 0
            for block in s:
                got += block.size
                if got >= 2 * 16000:  # two seconds are enough to know it speaks
                    s.cancel()
            return pushed, got

    pushed, got = run_bounded(speak_the_start, 30.0)
    assert got >= 2 * 16000
    assert pushed < 10.0


def test_pushing_after_end_input_starts_a_new_input(engine):
    with engine.stream(voice="slt") as s:
        s.push_text("One.")
        s.end_input()
        first = np.concatenate(list(s))
        s.push_text("Two.")
        s.end_input()
        second = np.concatenate(list(s))
    assert_same_audio(first, engine.synthesize("One.", voice="slt"))
    alone = engine.synthesize("Two.", voice="slt")
    assert abs(second.size - alone.size) <= 0.1 * alone.size


def test_reading_after_cancel_gives_the_fade_then_nothing_and_the_stream_goes_on(engine):
    with engine.stream(voice="slt") as s:
        s.push_text("Cancelled mid sentence, or so it seems to the listener.")
        s.end_input()
        first = s.read(1600)
        assert first.size == 1600
        s.cancel()
        tail = run_bounded(lambda: np.concatenate([b for b in s] or [np.zeros(0, np.float32)]), 5.0)
        assert tail.size <= 16000 * 0.2  # the fade, not the rest of the sentence
        assert run_bounded(lambda: s.read(1600, timeout=0.05), 5.0).size == 0
        assert not s.busy()
        s.push_text("Spoken normally afterwards.")
        s.end_input()
        assert sum(b.size for b in s) > 8000


def test_read_after_close_is_an_error(engine):
    s = engine.stream()
    s.close()
    with pytest.raises(libetude.InvalidArgument, match="closed"):
        s.read(100)
    assert list(s) == []


def test_read_into_wants_a_writable_float32_vector(engine):
    with engine.stream() as s:
        with pytest.raises(TypeError):
            s.read_into(np.zeros(100, dtype=np.float64))
        with pytest.raises(TypeError):
            s.read_into(np.zeros((10, 10), dtype=np.float32))


def test_a_read_with_a_timeout_returns_when_nothing_comes(engine):
    with engine.stream() as s:
        s.push_text("Held until more text comes")
        t0 = time.perf_counter()
        assert s.read(160, timeout=0.05).size == 0
        assert time.perf_counter() - t0 < 1.0
        with pytest.raises(libetude.InvalidArgument, match="timeout"):
            s.read(160, timeout=-1)


def test_a_forked_child_is_refused_the_parents_engine_and_may_make_its_own():
    """Threads do not survive fork(): in a child (multiprocessing's default
    start method on Linux) the parent's engine would wait for its workers
    for ever. It says so instead, and an engine the child makes speaks."""
    parents = libetude.Engine()
    with parents.stream() as s:  # the parent's engine has run its threads
        s.push_text("Before the fork.")
        s.end_input()
        assert s.read().size > 0
    kept = parents.stream()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports through the pipe, never returns
        signal.alarm(int(hang_bound(60)))
        result = "not refused"
        try:
            try:
                parents.stream()
            except libetude.InvalidArgument as error:
                result = str(error)
            kept.close()  # frees nothing in the child, and returns
            parents.close()
            with libetude.Engine() as own:
                result += f"|{own.synthesize('An engine of its own.').size}"
        except BaseException as error:
            result = f"failed: {error!r}|0"
        finally:
            os.write(write_end, result.encode())
            os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read_end) as pipe:
        got = pipe.read()
    assert os.WIFEXITED(status), f"the child hung or died ({status}): {got}"
    refused, samples = got.rsplit("|", 1)
    assert "forked" in refused and "spawn" in refused, refused
    assert int(samples) > 0
    kept.close()
    parents.close()


def test_without_espeak_data_text_is_refused_and_espeak_complains_once(tmp_path):
    """A machine with espeak-ng's library but not its data (the GPU pack's):
    a Piper voice still opens, text is refused naming ESPEAK_DATA_PATH, and
    espeak-ng's own complaint about its data comes once per process, not
    at each opening of the voice (two engines one after the other open it
    twice; before, each opening printed it)."""
    empty = tmp_path / "no-espeak-data"
    empty.mkdir()
    voice = str(TEST_DATA / "piper" / "test_medium.onnx")
    script = (
        "import sys, libetude\n"
        "for _ in range(2):\n"
        "    with libetude.Engine() as e, e.stream(voice=sys.argv[1]) as s:\n"
        "        try:\n"
        "            s.push_text('Hello there.')\n"
        "            s.end_input()\n"
        "        except libetude.EtudeError as err:\n"
        "            print(err)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, voice], capture_output=True, text=True, timeout=hang_bound(60),
        env={**os.environ, "ESPEAK_DATA_PATH": str(empty)},
    )
    assert run.returncode == 0, run.stderr
    refusals = run.stdout.splitlines()
    assert len(refusals) == 2, run.stdout
    assert all("ESPEAK_DATA_PATH" in r for r in refusals), run.stdout
    assert run.stderr.count("phontab") <= 1, run.stderr
