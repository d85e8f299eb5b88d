"""Bad input raises an EtudeError with the engine's (the CLI's) message, or
is spoken; never a crash or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import libetude
from conftest import TEST_DATA, assert_same_audio, run_bounded


def test_the_errors_are_runtime_errors_with_the_c_api_codes():
    assert issubclass(libetude.EtudeError, RuntimeError)
    for cls, code in [
        (libetude.InvalidArgument, -1),
        (libetude.InvalidText, -2),
        (libetude.InternalError, -3),
    ]:
        assert issubclass(cls, libetude.EtudeError) and cls.code == code


def test_unknown_voice_says_what_etude_says(engine, etude_bin, tmp_path):
    with pytest.raises(libetude.InvalidArgument) as e:
        engine.stream(voice="no-such-voice")
    cli = subprocess.run(
        [etude_bin, "say", "--voice", "no-such-voice", "Hi.", "-o", str(tmp_path / "x.wav")],
        capture_output=True, text=True, timeout=60,
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
        [sys.executable, "-c", script, voice], capture_output=True, text=True, timeout=60,
        env={**os.environ, "ESPEAK_DATA_PATH": str(empty)},
    )
    assert run.returncode == 0, run.stderr
    refusals = run.stdout.splitlines()
    assert len(refusals) == 2, run.stdout
    assert all("ESPEAK_DATA_PATH" in r for r in refusals), run.stdout
    assert run.stderr.count("phontab") <= 1, run.stderr
