"""Stream options are defined once, in the engine (engine/stream_options.h):
Python's keyword arguments, the native StreamOptions class and the adapters'
options are read from its table, and bad names or kinds get the engine's
message."""

from __future__ import annotations

import re

import pytest

import libetude
from conftest import CHECKOUT


def declared_members() -> list[str]:
    """The members of struct StreamOptions as the C++ header declares them."""
    header = (CHECKOUT / "engine" / "stream_options.h").read_text()
    body = header[header.index("struct StreamOptions {"):]
    body = body[:body.index("\n};")]
    return re.findall(r"^    [A-Za-z0-9_:<>]+ ([a-z_]+)(?: = [^;]*)?;", body, re.MULTILINE)


def test_the_bound_table_is_the_struct_of_the_header():
    table = libetude._native.STREAM_OPTIONS
    assert list(table) == declared_members()
    native = libetude._native.StreamOptions()
    for name, (_, kinds, default, _) in table.items():
        assert getattr(native, name) == default, name
        assert set(kinds) <= {"builtin", "piper", "mel"} and kinds, name


def test_the_keyword_options_are_the_table_less_the_voice_naming_fields():
    table = libetude._native.STREAM_OPTIONS
    assert set(libetude.STREAM_OPTIONS) == {
        name for name, (_, _, _, names_the_voice) in table.items() if not names_the_voice}
    assert {"voice", "piper_voice", "model"}.isdisjoint(libetude.STREAM_OPTIONS)


def test_every_keyword_option_is_taken_at_its_default(engine):
    # At its default an option asks for nothing, so any voice takes it.
    options = {name: o.default for name, o in libetude.STREAM_OPTIONS.items()
               if name != "sample_rate"}
    with engine.stream("slt", **options) as s:
        assert s.sample_rate == 16000


def test_an_unknown_option_is_refused_naming_the_options(engine):
    with pytest.raises(libetude.InvalidArgument,
                       match=r"unknown stream option 'sead' \(the options are: voice, "):
        engine.stream(voice="slt", sead=3)
    with pytest.raises(libetude.InvalidArgument, match="unknown stream option 'sead'"):
        engine.synthesize("Hi.", voice="slt", sead=3)
    with pytest.raises(libetude.InvalidArgument, match="chosen by the voice argument"):
        engine.stream(voice="slt", piper_voice="x.onnx")


def test_an_option_of_another_kind_gets_the_engines_message(engine, joe_model):
    with pytest.raises(libetude.InvalidArgument,
                       match="^noise_w applies to Piper voices; 'slt' is a built-in voice$"):
        engine.stream(voice="slt", noise_w=0.5)
    with pytest.raises(libetude.InvalidArgument,
                       match="^vocoder applies to built-in voices; .* is a Piper voice$"):
        engine.stream(voice=joe_model, vocoder="spectral")


def test_the_scheduling_class_is_an_option(engine):
    with engine.stream(voice="slt", scheduling="offline") as s:
        s.push_text("Hi.")
        s.end_input()
        assert sum(b.size for b in s) > 0
        assert not s.stats().realtime_workers
    with pytest.raises(libetude.InvalidArgument, match="live, network, offline"):
        engine.stream(voice="slt", scheduling="soon")


def test_the_pipecat_settings_are_the_stream_options():
    pipecat = pytest.importorskip("libetude.pipecat")
    from dataclasses import fields

    names = {f.name for f in fields(pipecat.EtudeTTSSettings)}
    assert set(libetude.STREAM_OPTIONS) - {"sample_rate"} <= names
