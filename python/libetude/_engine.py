"""Engine: loads voices, owns the workers, makes streams; synthesize()."""

from __future__ import annotations

import math
import threading
import weakref
from types import MappingProxyType
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Union

import numpy as np

from . import _native, _voices
from ._errors import InternalError, InvalidArgument
from ._stream import Stream, encode_text
from ._voices import VoiceInfo

EngineCapacity = _native.EngineCapacity
FirstAudioMeasure = _native.FirstAudioMeasure


class StreamOption(NamedTuple):
    """One keyword option of Engine.stream(), as the engine's table of
    StreamOptions (engine/stream_options.h) describes it."""

    type: str  # "str", "float", "optional_float", "bool", "int", "uint64", "scheduling"
    kinds: tuple[str, ...]  # the voice kinds it applies to: "builtin", "piper", "mel"
    default: object  # its value in new options of a kind it applies to (None: unset)


# Engine.stream()'s keyword options: the engine's table, less the fields that
# name the voice (the `voice` argument chooses those).
STREAM_OPTIONS: Mapping[str, StreamOption] = MappingProxyType({
    name: StreamOption(kind, tuple(kinds), default)
    for name, (kind, kinds, default, names_the_voice) in _native.STREAM_OPTIONS.items()
    if not names_the_voice
})

# synthesize() reads in blocks this long, waiting at most READ_POLL_MS for
# each, so that Ctrl-C is noticed between reads.
_SYNTH_FRAMES = 1 << 16
_READ_POLL_MS = 100



class Engine:
    """The speech engine: voices and the worker threads its streams share.

    ``preload``: voices to load now (built-in names, Piper voice names or
    paths; default ``["slt"]``); ``backend``/``device``: where preloaded
    Piper voices' decoders will run ("auto", "cpu", "cuda", "vulkan",
    "opencl"; device -1 is the best); ``precision``: the arithmetic of the
    devices' matrix products, "fp32" (default: the CPU's audio within the
    parity bounds) or "tf32" (CUDA's tensor cores; process-wide, as the
    devices are shared; other devices stay fp32). Close it (or use ``with``)
    to stop the workers; closing it closes its streams first.
    """

    def __init__(
        self,
        preload: Optional[Iterable[str]] = None,
        backend: str = "auto",
        device: int = -1,
        precision: str = "fp32",
    ):
        names = ["slt"] if preload is None else [str(v) for v in preload]
        resolved = [_voices.resolve(v).value for v in names]
        self._native: Optional[_native.Engine] = _native.Engine(resolved, backend, device,
                                                                     str(precision))
        self._streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()
        self._lock = threading.Lock()
        self._builtin_rates: dict[str, int] = {}

    def _live(self) -> _native.Engine:
        native = self._native
        if native is None:
            raise InvalidArgument("the engine is closed")
        return native

    @property
    def closed(self) -> bool:
        return self._native is None

    def close(self) -> None:
        """Closes every stream of this engine, then stops its workers."""
        with self._lock:
            streams = list(self._streams)
            self._streams.clear()
        for s in streams:
            s.close()
        # The workers stop when the last reference to the native engine goes:
        # this one, once no native stream (which holds one) is left.
        self._native = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<libetude.Engine{' closed' if self.closed else ''}>"

    def _forget(self, stream: Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    # ---- voices -----------------------------------------------------------------
    def preload(self, voice: str) -> None:
        """Loads `voice` now and keeps it for the engine's life."""
        self._live().preload_voice(_voices.resolve(voice).value)

    def voices(self) -> list[VoiceInfo]:
        """The built-in voices, then the Piper voices of the voice folders
        and of installed Python packages (unusable ones left out; `python -m
        libetude voices` shows them and why)."""
        out = [_voices.builtin_voice(n, self._builtin_rate(n)) for n in _native.Engine.voices()]
        out += [info for _, info, _ in _voices.piper_voices() if info is not None]
        return out

    def describe_voice(self, voice: str) -> VoiceInfo:
        """The VoiceInfo of one voice, named as stream() takes it."""
        r = _voices.resolve(voice)
        if r.builtin:
            return _voices.builtin_voice(r.value, self._builtin_rate(r.value))
        pkg = next((v for v in _voices.package_voices() if v.model_path == r.value), None)
        if pkg is not None:
            source, package = "package", pkg.package
        else:
            source, package = ("path" if _voices.looks_like_path(voice) else "folder"), None
        return _voices.describe_piper(r.value, source, package)

    def _builtin_rate(self, name: str) -> int:
        # The public API tells a voice's own rate through a stream made at
        # rate 0; once per voice.
        if name not in self._builtin_rates:
            o = _native.StreamOptions()
            o.voice, o.sample_rate = name, 0.0
            self._builtin_rates[name] = int(self._live().create_stream(o).sample_rate())
        return self._builtin_rates[name]

    # ---- streams ------------------------------------------------------------------
    def stream(self, voice: str = "slt", sample_rate: Optional[float] = None,
               **options: Any) -> Stream:
        """A new stream. `voice`: a built-in voice, a Piper voice's path or
        name (voice folders, then Python packages); `sample_rate`: 8000 to
        192000 Hz, None for the voice's own. `options`: any field of the
        engine's StreamOptions (engine/stream_options.h; the names are
        ``libetude.STREAM_OPTIONS``), e.g. ``speaker``, ``noise_scale``,
        ``noise_w`` and ``seed`` for Piper voices, ``length_scale`` (pace,
        larger is slower), ``latency_ms`` (default 100), ``vocoder``
        ("mlsa" or "spectral", built-in voices), ``backend``/``device``,
        ``scheduling`` ("live", "network" or "offline"). None keeps an
        option's default. An unknown name, or an option the voice's kind
        does not take (a Piper option on a built-in voice), is
        InvalidArgument with the engine's message."""
        native = self._live().create_stream(self._options(voice, sample_rate, options))
        stream = Stream(native, self)
        with self._lock:
            if self._native is None:  # closed meanwhile
                stream.close()
                raise InvalidArgument("the engine is closed")
            self._streams.add(stream)
        return stream

    def capacity(
        self, voice: str = "slt", sample_rate: Optional[float] = None, *, at_once: int = 0,
        **options,
    ) -> EngineCapacity:
        """How many real-time streams this machine holds with `voice` (and
        stream()'s options), as Engine::measure_capacity() finds it. On the
        CPU, `at_once` streams (0: one per CPU this process may use, 2 to 32)
        speak a typical two-sentence reply together, and their aggregate
        speed less a fifth is ``.streams`` (``.speed`` and
        ``.streams_measured`` say how it was found). Where a Piper voice's
        decoder runs on a device, the device's batches (the decoder's and the
        flow's) are timed instead (``.device``, ``.launch_ns``,
        ``.frame_ns``, ``.device_streams``) beside the host's analysis
        (``.host_speed``, ``.host_streams``), and ``.streams`` is the
        smaller; ``.device_error`` says why a device was not measured. What `etude serve` admits at once; takes about a second
        with a Piper medium voice."""
        if isinstance(at_once, bool) or not isinstance(at_once, int) or not 0 <= at_once <= 32:
            raise InvalidArgument(f"at_once must be a whole number from 0 to 32, not {at_once!r}")
        return self._live().measure_capacity(self._options(voice, sample_rate, options), at_once)

    def first_audio(
        self, voice: str = "slt", sample_rate: Optional[float] = None, *, streams: int,
        **options,
    ) -> FirstAudioMeasure:
        """How soon each of `streams` streams (1 to 64) of `voice` (and
        stream()'s options) is heard when all start at once: each speaks the
        same reply, read as it is made, and ``.median_ms`` and ``.last_ms``
        are the median and the last of their first audios, from the common
        start. With `streams` the capacity(), ``.last_ms`` is the first
        audio a server admitting that many can promise (`etude serve` logs
        it). Takes about as long as that last first audio."""
        most = _native.MOST_STARTED_TOGETHER
        if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= most:
            raise InvalidArgument(
                f"streams must be a whole number from 1 to {most}, not {streams!r}")
        return self._live().measure_first_audio(
            self._options(voice, sample_rate, options), streams)

    def synthesize(
        self,
        text: Union[str, bytes],
        voice: str = "slt",
        sample_rate: Optional[float] = None,
        **options,
    ) -> np.ndarray:
        """All of `text` spoken, as one float32 array: what `etude say TEXT
        --voice VOICE --rate RATE` writes. Takes stream()'s options.

        An offline render, as `etude say` to a file is: unless ``scheduling``
        says otherwise, its work runs behind every stream someone hears and
        never at real-time priority (a whole array is wanted, not each block
        in time), where a stream() read block by block keeps the live
        class's real-time workers."""
        data = encode_text(text)
        if options.get("scheduling") is None:
            options["scheduling"] = "offline"
        with self.stream(voice, sample_rate, **options) as s:
            s.push_text(data)
            s.end_input()
            native = s._live()
            parts = []
            while True:
                block = native.read_block(_SYNTH_FRAMES, _READ_POLL_MS)
                if block.size:
                    parts.append(block)
                elif not native.busy():
                    break
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _options(self, voice: str, sample_rate: Optional[float],
                 options: dict[str, Any]) -> _native.StreamOptions:
        """The native options: the voice's kind from `voice`, then each
        keyword option by the engine's table, converted to its type. Which
        options apply to the voice's kind is the engine's check, made as
        each is set."""
        if not isinstance(voice, str):
            raise InvalidArgument(f"voice must be a str, not {type(voice).__name__}")
        r = _voices.resolve(voice)
        o = _native.StreamOptions("builtin" if r.builtin else "piper")
        if r.builtin:
            o.voice = r.value
        else:
            o.piper_voice = r.value
        o.sample_rate = 0.0 if sample_rate is None else _number("sample_rate", sample_rate)
        for name, value in options.items():
            _native.stream_option(name)  # an unknown name: the engine's message
            kind, _, _, names_the_voice = _native.STREAM_OPTIONS[name]
            if names_the_voice:
                raise InvalidArgument(f"{name} is chosen by the voice argument, not by name")
            if value is not None:
                setattr(o, name, _convert(name, kind, value))
        return o


def _convert(name: str, kind: str, value: object) -> object:
    """`value` as the native field of type `kind` (STREAM_OPTIONS) takes it."""
    if kind == "str":
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InvalidArgument(f"{name} must be a str, not {value!r}")
        return str(value)  # a speaker may be given by id
    if kind in ("float", "optional_float"):
        return _number(name, value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be True or False, not {value!r}")
        return value
    if kind in ("int", "uint64"):
        low, high = (0, 2**64 - 1) if kind == "uint64" else (-(2**31), 2**31 - 1)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidArgument(f"{name} must be a whole number from {low} to {high}, "
                                  f"not {value!r}")
        return value
    if kind == "scheduling":
        if isinstance(value, _native.SchedulingClass):
            return value
        names = list(_native.SchedulingClass.__members__)
        if value not in names:
            raise InvalidArgument(f"{name} must be one of {', '.join(names)}, not {value!r}")
        return _native.SchedulingClass[value]
    raise InternalError(f"{name}: the engine's option type {kind!r} is not known here")


def _number(name: str, value: object) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(x):
        raise InvalidArgument(f"{name} must be a finite number, not {value!r}")
    return x
