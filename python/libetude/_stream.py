"""Stream: text in, numpy audio out, as a context manager and an iterator
(also ``async for``), over the native Stream (engine/engine.h)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import TYPE_CHECKING, AsyncIterator, Iterator, NamedTuple, Optional, Union

import numpy as np

from . import _native
from ._errors import InvalidArgument, InvalidText

if TYPE_CHECKING:
    from ._engine import Engine

# How long one wait for audio lasts while iterating. The GIL is free during
# it; between waits a cancel() or close() from another thread, Ctrl-C and
# newly pushed text are noticed, so it bounds how late the iteration ends
# after a cancel() when no fade is pending.
POLL_MS = 20


def encode_text(text: Union[str, bytes]) -> bytes:
    """UTF-8 for the engine. A str that UTF-8 cannot hold (a lone surrogate,
    as from surrogateescape or a bad JSON escape) is InvalidText, as invalid
    UTF-8 bytes are in the engine."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    if not isinstance(text, str):
        raise TypeError(f"text must be str or bytes, not {type(text).__name__}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidText(
            f"text is not valid Unicode (a lone surrogate U+{ord(text[e.start]):04X} at "
            f"index {e.start} cannot be UTF-8)"
        ) from None


class Mark(NamedTuple):
    """A point in a stream's speech (Stream.marks()): an SSML mark, or a
    written word's start after Stream.report_words()."""

    kind: str  # "mark" or "word"
    name: str  # the mark's name, or the word as written
    sample: int  # where it is heard, in the stream's samples (compare Stream.position())
    seconds: float  # the same, in seconds of the stream's audio


class Stream:
    """One voice speaking at one output rate; made by Engine.stream().

    Push text (in pieces cut anywhere: the last, incomplete sentence is held
    until more text or end_input()), then read audio: iterate (``for block
    in stream``, ``async for block in stream``), read(), or read_into(). One
    reader at a time; cancel() and close() may come from any thread.
    """

    def __init__(self, native: _native.Stream, engine: Engine):
        self._native: Optional[_native.Stream] = native
        self._engine = engine  # the engine outlives its streams
        self._read_lock = threading.Lock()
        # True until end_input() or cancel() (and again after a push that
        # follows them): more text may come, so an idle stream is not yet
        # finished. A reader may start before the first text (LiveKit's
        # stream does, before the language model's first token).
        self._input_open = True
        # Set by push_text(), end_input(), cancel() and close(): an iteration
        # waiting for its caller's next text wakes on it instead of polling.
        self._input_event = threading.Event()
        self._final_stats: Optional[_native.StreamStats] = None
        rate = native.sample_rate()
        self._block_frames = max(1, int(round(rate * 0.010)))  # the engine's 10 ms block
        self._sample_rate = rate

    # ---- lifetime -----------------------------------------------------------
    def _live(self) -> _native.Stream:
        native = self._native
        if native is None:
            raise InvalidArgument("the stream is closed")
        return native

    @property
    def closed(self) -> bool:
        return self._native is None

    def close(self) -> None:
        """Cancels and frees the stream; an iteration in progress ends. Safe
        to call twice and from any thread."""
        native, self._native = self._native, None
        if native is not None:
            self._input_open = False
            # Speech still going is cut; a finished stream is not counted
            # as cancelled. Its last statistics stay readable (stats()).
            if native.busy():
                native.cancel()
            self._final_stats = native.stats()
            self._input_event.set()
            self._engine._forget(self)
        # The native stream (and its thread) goes with the last reference:
        # here, or when a read in another thread returns.

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._sample_rate:g} Hz"
        return f"<libetude.Stream {state}>"

    # ---- text in --------------------------------------------------------------
    def push_text(self, text: Union[str, bytes]) -> int:
        """Queues text to speak after what is queued; returns the sentences it
        queued (0 while it only extends the held sentence)."""
        data = encode_text(text)
        native = self._live()
        self._input_open = True
        try:
            return native.push_text(data)
        finally:
            self._input_event.set()

    def end_input(self) -> int:
        """Ends the input: the held sentence is queued. Iteration then ends
        once everything pushed has been spoken. Text pushed afterwards starts
        a new input (spoken normally; iterate again to read it)."""
        native = self._live()
        try:
            return native.end_input()
        finally:
            self._input_open = False
            self._input_event.set()

    def push_ssml(self, ssml: Union[str, bytes]) -> int:
        """Queues an SSML document (<speak>, <mark/>, <break/>, <prosody>,
        <say-as interpret-as="characters">); returns the sentences it queued.
        Not well-formed XML is spoken as its text with the marks and breaks a
        lenient reading finds; invalid UTF-8 or a mark name over 63 bytes
        raises InvalidText with nothing queued."""
        data = encode_text(ssml)
        native = self._live()
        self._input_open = True
        try:
            return native.push_ssml(data)
        finally:
            self._input_event.set()

    def push_mark(self, name: str) -> None:
        """Queues a mark after the text pushed so far (it ends the held
        sentence); marks() hands it out when production reaches it."""
        self._live().push_mark(name)
        self._input_open = True
        self._input_event.set()

    def push_break(self, ms: float) -> None:
        """Queues ``ms`` milliseconds (0 to 60000) of silence after the text so far."""
        self._live().push_break(float(ms))
        self._input_open = True
        self._input_event.set()

    def set_prosody(
        self, rate: float = 1.0, pitch: float = 1.0, volume: float = 1.0, range: float = 1.0
    ) -> None:
        """The text pushed from now on is spoken at ``rate`` (0.1 to 10, times
        the voice's pace), ``pitch`` (0.5 to 2, times its F0), ``range`` (0 to
        4, times its F0's spread about its mean; pitch and range: built-in
        voices only) and ``volume`` (0 to 4, times its amplitude). It ends the
        held sentence. SSML's <prosody> applies within it."""
        self._live().set_prosody(float(rate), float(pitch), float(range), float(volume))

    def report_words(self, on: bool = True) -> None:
        """Also hand out each written word's start as a Mark of kind "word",
        for the text pushed after it (off by default)."""
        self._live().report_words(bool(on))

    def marks(self) -> list[Mark]:
        """The marks (and words, after report_words()) production has reached
        since the last call, in order. Each is heard when position() reaches
        its ``sample``. Never blocks."""
        out = []
        native = self._live()
        while (m := native.next_mark()) is not None:
            is_word, name, sample = m
            out.append(Mark("word" if is_word else "mark", name, sample, sample / self._sample_rate))
        return out

    def position(self) -> int:
        """Samples of this stream's audio read so far (padding excluded)."""
        return self._live().position()

    def cancel(self) -> None:
        """Stops speaking with a short fade (5 ms) and drops queued and held
        text; any thread. An iteration ends once the fade is read."""
        native = self._native
        if native is not None:
            self._input_open = False
            native.cancel()
            self._input_event.set()

    # ---- audio out --------------------------------------------------------------
    def read(self, max_frames: int = 4096, timeout: Optional[float] = None) -> np.ndarray:
        """The next audio, at most `max_frames` samples, as a new float32
        array. Without a timeout it waits until `max_frames` are ready or the
        speech has ended (call end_input() first, or it waits for more text);
        with one (seconds) it returns what came within it. Empty: nothing
        came, or nothing is left."""
        if max_frames < 0:
            raise InvalidArgument(f"max_frames must be 0 or more, not {max_frames}")
        native = self._live()
        with self._read_lock:
            return native.read_block(max_frames, _timeout_ms(timeout))

    def read_into(self, out: np.ndarray, timeout: Optional[float] = None) -> int:
        """As read(), into the caller's 1-D C-contiguous float32 array (no
        allocation); returns the number of samples written."""
        native = self._live()
        with self._read_lock:
            ms = _timeout_ms(timeout)
            return native.read(out) if ms < 0 else native.read_some(out, ms)

    def _next_block(self, max_frames: int) -> Optional[np.ndarray]:
        """The next block, or None when the iteration is over: the stream is
        closed, or idle with its input ended (end_input() or cancel())."""
        while True:
            native = self._native
            if native is None:
                return None
            self._input_event.clear()
            started = time.monotonic()
            with self._read_lock:
                block = native.read_block(max_frames, POLL_MS)
            if block.size:
                return block
            if not self._input_open and not native.busy():
                return None
            # The engine returns at once when no audio is on its way (it
            # waits for more text, or nothing was pushed yet): wait for the
            # caller's next push, end_input() or cancel() rather than spin.
            if time.monotonic() - started < POLL_MS / 2000.0:
                self._input_event.wait(POLL_MS / 1000.0)

    def blocks(self, max_frames: Optional[int] = None) -> Iterator[np.ndarray]:
        """Iterates over the audio as the engine makes it (blocks of up to
        `max_frames`, default one 10 ms engine block) until everything pushed
        before end_input() has been spoken, or until cancel()/close()."""
        frames = self._block_frames if max_frames is None else int(max_frames)
        if frames <= 0:
            raise InvalidArgument(f"max_frames must be above 0, not {frames}")
        while True:
            block = self._next_block(frames)
            if block is None:
                return
            yield block

    def __iter__(self) -> Iterator[np.ndarray]:
        return self.blocks()

    async def ablocks(self, max_frames: Optional[int] = None) -> AsyncIterator[np.ndarray]:
        """blocks() for an event loop: each wait runs in a worker thread, so
        other tasks (other streams) go on meanwhile."""
        frames = self._block_frames if max_frames is None else int(max_frames)
        if frames <= 0:
            raise InvalidArgument(f"max_frames must be above 0, not {frames}")
        while True:
            block = await asyncio.to_thread(self._next_block, frames)
            if block is None:
                return
            yield block

    def __aiter__(self) -> AsyncIterator[np.ndarray]:
        return self.ablocks()

    # ---- state -------------------------------------------------------------------
    def busy(self) -> bool:
        """True while text is queued or held, or audio is not yet read."""
        native = self._native
        return native is not None and native.busy()

    @property
    def sample_rate(self) -> float:
        """The output rate in Hz."""
        return self._sample_rate

    @property
    def latency_ms(self) -> float:
        """The fixed latency the engine adds (StreamOptions::latency_ms)."""
        return self._live().latency_ms()

    @property
    def block_frames(self) -> int:
        """Samples in one engine block (10 ms): the iteration's block size."""
        return self._block_frames

    def stats(self) -> _native.StreamStats:
        """A snapshot of the counters: underruns, first_audio_ms, blocks per
        processor (blocks_primary, blocks_fallback, blocks_ahead, blocks_gpu),
        sentences, ... (StreamStats in engine/engine.h). After close(), the
        stream's last counters."""
        native = self._native
        if native is None and self._final_stats is not None:
            return self._final_stats
        return self._live().stats()

    def push_phoneme_ids(self, ids: list[int]) -> None:
        """Piper streams: queues one sentence as the voice's phoneme ids."""
        self._live().push_phoneme_ids(list(ids))

    def write_trace(self, path: str) -> None:
        """Writes the scheduler's block records as a Chrome trace (JSON)."""
        self._live().write_trace(str(path))


def _timeout_ms(timeout: Optional[float]) -> int:
    """-1 for none (the blocking read), else whole milliseconds, rounded up."""
    if timeout is None:
        return -1
    if not timeout >= 0:  # also NaN
        raise InvalidArgument(f"timeout must be 0 or more seconds, not {timeout}")
    return min(int(math.ceil(timeout * 1000.0)), 2**31 - 1)
