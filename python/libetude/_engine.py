"""Engine: loads voices, owns the workers, makes streams; synthesize()."""

from __future__ import annotations

import math
import threading
import weakref
from typing import Iterable, Optional, Union

import numpy as np

from . import _native, _voices
from ._errors import InvalidArgument
from ._stream import Stream, encode_text
from ._voices import VoiceInfo

EngineCapacity = _native.EngineCapacity
FirstAudioMeasure = _native.FirstAudioMeasure

# synthesize() reads in blocks this long, waiting at most READ_POLL_MS for
# each, so that Ctrl-C is noticed between reads.
_SYNTH_FRAMES = 1 << 16
_READ_POLL_MS = 100

_PIPER_ONLY = ("speaker", "noise_scale", "noise_w", "seed")
# stream()'s keyword options after voice and sample_rate, which _options()
# reads; capacity() and first_audio() take the same ones through **options.
_STREAM_OPTIONS = ("speaker", "noise_scale", "length_scale", "noise_w", "seed", "latency_ms",
                   "vocoder", "backend", "device")


class Engine:
    """The speech engine: voices and the worker threads its streams share.

    ``preload``: voices to load now (built-in names, Piper voice names or
    paths; default ``["slt"]``); ``backend``/``device``: where preloaded
    Piper voices' decoders will run ("auto", "cpu", "cuda", "vulkan",
    "opencl"; device -1 is the best). Close it (or use ``with``) to stop the
    workers; closing it closes its streams first.
    """

    def __init__(
        self,
        preload: Optional[Iterable[str]] = None,
        backend: str = "auto",
        device: int = -1,
    ):
        names = ["slt"] if preload is None else [str(v) for v in preload]
        resolved = [_voices.resolve(v).value for v in names]
        self._native: Optional[_native.Engine] = _native.Engine(resolved, backend, device)
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
    def stream(
        self,
        voice: str = "slt",
        sample_rate: Optional[float] = None,
        *,
        speaker: Union[str, int, None] = None,
        noise_scale: Optional[float] = None,
        length_scale: Optional[float] = None,
        noise_w: Optional[float] = None,
        seed: Optional[int] = None,
        latency_ms: Optional[float] = None,
        vocoder: Optional[str] = None,
        backend: Optional[str] = None,
        device: Optional[int] = None,
    ) -> Stream:
        """A new stream. `voice`: a built-in voice, a Piper voice's path or
        name (voice folders, then Python packages); `sample_rate`: 8000 to
        192000 Hz, None for the voice's own. `speaker`, `noise_scale`,
        `noise_w` and `seed` apply to Piper voices (unset: the voice's own;
        seed 0); `length_scale` (pace, larger is slower) to both kinds;
        `latency_ms`: the engine's fixed latency (default 100); `vocoder`:
        "mlsa" or "spectral" (built-in voices); `backend`/`device`: where the
        spectral vocoder or a Piper decoder runs."""
        options = self._options(
            voice, sample_rate, speaker=speaker, noise_scale=noise_scale,
            length_scale=length_scale, noise_w=noise_w, seed=seed, latency_ms=latency_ms,
            vocoder=vocoder, backend=backend, device=device,
        )
        native = self._live().create_stream(options)
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
        stream()'s options): `at_once` streams (0: one per CPU this process
        may use, 2 to 32) speak a typical two-sentence reply together, and their
        aggregate speed less two fifths is ``.streams`` (``.speed`` and
        ``.streams_measured`` say how it was found). What `etude serve`
        admits at once; takes about a second with a Piper medium voice."""
        if isinstance(at_once, bool) or not isinstance(at_once, int) or not 0 <= at_once <= 32:
            raise InvalidArgument(f"at_once must be a whole number from 0 to 32, not {at_once!r}")
        return self._live().measure_capacity(
            self._measured_options(voice, sample_rate, options), at_once)

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
            self._measured_options(voice, sample_rate, options), streams)

    def _measured_options(self, voice, sample_rate, options: dict):
        """A measurement's stream options: stream()'s keyword options, and
        no others."""
        kw = {name: options.pop(name, None) for name in _STREAM_OPTIONS}
        if options:
            raise InvalidArgument(f"unknown option {sorted(options)[0]!r}")
        return self._options(voice, sample_rate, **kw)

    def synthesize(
        self,
        text: Union[str, bytes],
        voice: str = "slt",
        sample_rate: Optional[float] = None,
        **options,
    ) -> np.ndarray:
        """All of `text` spoken, as one float32 array: what `etude say TEXT
        --voice VOICE --rate RATE` writes. Takes stream()'s options."""
        data = encode_text(text)
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

    def _options(self, voice: str, sample_rate: Optional[float], **kw) -> _native.StreamOptions:
        if not isinstance(voice, str):
            raise InvalidArgument(f"voice must be a str, not {type(voice).__name__}")
        r = _voices.resolve(voice)
        o = _native.StreamOptions()
        if r.builtin:
            o.voice = r.value
            for name in _PIPER_ONLY:
                if kw[name] is not None:
                    raise InvalidArgument(
                        f"{name} applies to Piper voices; '{voice}' is a built-in voice")
        else:
            o.piper_voice = r.value
        o.sample_rate = 0.0 if sample_rate is None else _number("sample_rate", sample_rate)
        if kw["speaker"] is not None:
            o.speaker = str(kw["speaker"])
        for name in ("noise_scale", "length_scale", "noise_w"):
            if kw[name] is not None:
                setattr(o, name, _number(name, kw[name]))
        if kw["seed"] is not None:
            seed = kw["seed"]
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise InvalidArgument(f"seed must be a whole number from 0 to 2^64-1, not {seed!r}")
            o.seed = seed
        if kw["latency_ms"] is not None:
            o.latency_ms = _number("latency_ms", kw["latency_ms"])
        if kw["vocoder"] is not None:
            o.vocoder = str(kw["vocoder"])
        if kw["backend"] is not None:
            o.backend = str(kw["backend"])
        if kw["device"] is not None:
            o.device = int(kw["device"])
        return o


def _number(name: str, value: object) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(x):
        raise InvalidArgument(f"{name} must be a finite number, not {value!r}")
    return x
