"""SSML, marks, word timings and prosody from Python: the same as the engine
gives `etude say --ssml --timings`, and bad input refused with its reason."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import libetude
from conftest import hang_bound

DOC = (
    '<speak>The lights are off.<mark name="a"/><break time="300ms"/>'
    '<prosody rate="fast" volume="soft">The door is locked.</prosody><mark name="end"/></speak>'
)


def read_all(stream: libetude.Stream) -> np.ndarray:
    return np.concatenate(list(stream))


def test_marks_and_words_equal_etude_say_timings(engine, etude_bin, tmp_path):
    with engine.stream(voice="slt") as s:
        s.report_words()
        s.push_ssml(DOC)
        s.end_input()
        audio = read_all(s)
        marks = s.marks()
        assert s.position() == len(audio)
    timings = tmp_path / "t.jsonl"
    wav = tmp_path / "t.wav"
    subprocess.run(
        [etude_bin, "say", "--ssml", DOC, "-o", str(wav), "--float", "--timings", str(timings)],
        check=True, capture_output=True, timeout=hang_bound(120),
    )
    want = [json.loads(line) for line in timings.read_text().splitlines()]
    got = [{"type": m.kind, "name": m.name, "sample": m.sample} for m in marks]
    assert got == [{k: w[k] for k in ("type", "name", "sample")} for w in want]
    assert [m.name for m in marks if m.kind == "word"] == [
        "The", "lights", "are", "off", "The", "door", "is", "locked"]
    assert all(isinstance(m, libetude.Mark) for m in marks)
    assert marks[-1].kind == "mark" and marks[-1].sample == len(audio)
    assert marks[-1].seconds == pytest.approx(len(audio) / 16000)
    # The 300 ms break is silence right after mark "a".
    a = next(m for m in marks if m.name == "a")
    assert not np.any(audio[a.sample : a.sample + 4800])


def test_marks_wait_for_the_consumer_and_words_are_off_by_default(engine):
    with engine.stream(voice="slt") as s:
        s.push_text("No words are reported.")
        s.push_mark("here")
        s.push_break(50)
        s.push_text("Still none.")
        s.end_input()
        read_all(s)
        marks = s.marks()
        assert [(m.kind, m.name) for m in marks] == [("mark", "here")]
        assert s.marks() == []  # taken once
        stats = s.stats()
        assert stats.marks == 1 and stats.marks_dropped == 0 and stats.words_unpaired == 0


def test_set_prosody_scales_the_volume_exactly(engine):
    plain = engine.synthesize("Volume check.", voice="slt")
    with engine.stream(voice="slt") as s:
        s.set_prosody(volume=0.5)
        s.push_text("Volume check.")
        s.end_input()
        soft = read_all(s)
    assert len(soft) == len(plain)
    assert np.array_equal(soft, plain * np.float32(0.5))


def test_bad_ssml_marks_and_prosody_are_refused_with_the_reason(engine):
    with engine.stream(voice="slt") as s:
        with pytest.raises(libetude.InvalidText, match="UTF-8"):
            s.push_ssml(b"<speak>caf\xc3</speak>")
        with pytest.raises(libetude.InvalidText, match="63"):
            s.push_mark("m" * 64)
        with pytest.raises(libetude.InvalidArgument, match="60000"):
            s.push_break(60001)
        with pytest.raises(libetude.InvalidArgument, match="rate"):
            s.set_prosody(rate=0)
        with pytest.raises(libetude.InvalidArgument, match="pitch"):
            s.set_prosody(pitch=3)
        with pytest.raises(libetude.InvalidArgument, match="range"):
            s.set_prosody(range=5)
        # Malformed SSML is spoken as its text, not refused.
        assert s.push_ssml("<speak>Unclosed <prosody rate='fast'>tag") >= 0
        s.end_input()
        assert len(read_all(s)) > 0
        assert not s.busy()
