"""Stream options are defined once, in the engine (engine/stream_options.h:
StreamOptions, its variant of each kind of voice's options, and their
table): Python's keyword arguments, the native StreamOptions class and the
adapters' options are read from the table, and bad names or kinds get the
engine's message."""

from __future__ import annotations

import re

import pytest

import libetude
from conftest import CHECKOUT


def declared_members() -> list[str]:
    """The fields of StreamOptions and of each kind of voice's options as the
    C++ header declares them: StreamOptions' own (less `voice`, the variant
    of the others), then BuiltinVoiceOptions', PiperVoiceOptions' and
    MelVoiceOptions', a field two kinds share where it first appears."""
    header = (CHECKOUT / "engine" / "stream_options.h").read_text()
    names: list[str] = []
    for struct in ("StreamOptions", "BuiltinVoiceOptions", "PiperVoiceOptions",
                   "MelVoiceOptions"):
        body = header[header.index(f"struct {struct} {{"):]
        body = body[:body.index("\n};")]
        members = re.findall(r"^    [A-Za-z0-9_:<>]+ ([a-z_]+)(?: = [^;]*)?;", body, re.MULTILINE)
        if struct == "StreamOptions":
            assert members[0] == "voice"
            members = members[1:]
        names += [m for m in members if m not in names]
    return names


def test_the_bound_table_is_the_struct_of_the_header():
    table = libetude._native.STREAM_OPTIONS
    assert list(table) == declared_members()
    native = libetude._native.StreamOptions()
    for name, (_, kinds, default, _) in table.items():
        assert getattr(native, name) == default, name
        assert set(kinds) <= {"builtin", "piper", "mel"} and kinds, name


def test_native_options_are_made_for_one_kind_of_voice():
    native = libetude._native
    assert native.StreamOptions().kind == "builtin"
    piper = native.StreamOptions("piper")
    assert piper.kind == "piper"
    piper.seed = 5
    assert piper.seed == 5
    with pytest.raises(libetude.InvalidArgument,
                       match="^vocoder applies to built-in voices; '' is a Piper voice$"):
        piper.vocoder = "spectral"
    piper.vocoder = "mlsa"  # at its default: no request
    with pytest.raises(libetude.InvalidArgument, match="^model applies to mel streams"):
        piper.model = "m.lef"  # the kind is chosen when the options are made
    assert native.StreamOptions("mel").kind == "mel"
    with pytest.raises(libetude.InvalidArgument, match="builtin, piper or mel, not 'flite'"):
        native.StreamOptions("flite")


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
                       match=r"unknown stream option 'sead' \(the options are: sample_rate, "):
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
