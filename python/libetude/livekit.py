"""LibEtude as a LiveKit Agents text-to-speech plugin.

    pip install "libetude[livekit]"

``EtudeTTS`` is a streaming ``tts.TTS``: ``stream()`` feeds the text an agent
pushes, in whatever pieces the LLM produces, straight into one LibEtude
stream. The engine itself holds back an unfinished sentence until the rest
arrives or the input ends, so no sentence tokenizer runs in Python. Audio is
emitted block by block as the engine makes it. Closing a stream cancels the
engine's stream: it fades out within 5 ms and drops what was queued.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

try:
    from livekit.agents import (
        DEFAULT_API_CONNECT_OPTIONS,
        APIConnectOptions,
        APIError,
        tts,
        utils,
    )
    from livekit.agents.types import TimedString
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        "libetude.livekit needs LiveKit Agents; install it with: pip install 'libetude[livekit]'"
    ) from error

import libetude
from libetude._pcm import to_pcm16  # the package's one float-to-16-bit rule
from libetude._words import HeardWords

__all__ = ["EtudeTTS"]


class EtudeTTS(tts.TTS):
    """LiveKit ``tts.TTS`` that synthesizes on this machine with LibEtude."""

    def __init__(
        self,
        *,
        engine: libetude.Engine | None = None,
        voice: str = "slt",
        sample_rate: int | None = None,
        **options: Any,
    ) -> None:
        """Create the TTS.

        Args:
            engine: An engine to share with other TTS instances or streams; a
                new one is made when omitted, and closed by ``aclose()`` (a
                given one stays open: its owner closes it).
            voice: A built-in voice ("slt", "rms", "awb") or a Piper voice's
                name or path, as ``Engine.stream`` takes it.
            sample_rate: Output rate in Hz; None is the voice's own rate.
            **options: ``Engine.stream``'s keyword options, the engine's
                table of them (``libetude.STREAM_OPTIONS``): e.g. ``speaker``,
                ``length_scale``, ``noise_scale``, ``noise_w`` and ``seed``
                for a Piper voice. None keeps an option's default. Checked
                here: an unknown name, or an option the voice does not take,
                raises ``libetude.InvalidArgument``.
        """
        owns_engine = engine is None
        engine = engine if engine is not None else libetude.Engine()
        options = {"voice": voice, **{k: v for k, v in options.items() if v is not None}}
        try:
            own_rate = _checked_rate(engine, options)
        except BaseException:
            if owns_engine:
                engine.close()
            raise
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=own_rate if sample_rate is None else int(sample_rate),
            num_channels=1,
        )
        self._engine = engine
        self._owns_engine = owns_engine
        self._voice = voice
        self._options = options
        self._open_requests: weakref.WeakSet[tts.ChunkedStream | tts.SynthesizeStream] = (
            weakref.WeakSet()
        )

    @property
    def engine(self) -> libetude.Engine:
        """The engine this TTS synthesizes with."""
        return self._engine

    @property
    def model(self) -> str:
        return self._voice

    @property
    def provider(self) -> str:
        return "libetude"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> EtudeChunkedStream:
        """Speak ``text`` as one request; its audio streams as it is made."""
        request = EtudeChunkedStream(tts=self, input_text=text, conn_options=conn_options)
        self._open_requests.add(request)
        return request

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> EtudeSynthesizeStream:
        """A stream whose pushed text is spoken by one LibEtude stream."""
        request = EtudeSynthesizeStream(tts=self, conn_options=conn_options)
        self._open_requests.add(request)
        return request

    def update_options(self, *, voice: str | None = None, **options: Any) -> None:
        """Change the voice or ``Engine.stream``'s options for the requests
        made from now on (a request already open keeps its own). Each one
        given is set over those given before (None: back to the option's
        default), so a Piper option must be unset (None) to change to a
        built-in voice. Checked as the constructor checks them, before
        anything changes; the output rate stays the TTS's (``sample_rate``
        is refused). LiveKit's ``NOT_GIVEN`` leaves an option as it is."""
        if "sample_rate" in options:
            raise libetude.InvalidArgument(
                "sample_rate is fixed when the TTS is made (LiveKit reads it once)")
        merged = dict(self._options)
        if voice is not None and utils.is_given(voice):
            merged["voice"] = voice
        for name, value in options.items():
            if not utils.is_given(value):
                continue
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        _checked_rate(self._engine, merged)
        self._voice = merged["voice"]
        self._options = merged

    async def aclose(self) -> None:
        """Close every request still open; each cancels its engine stream.
        An engine the TTS made itself is closed too."""
        await asyncio.gather(*(request.aclose() for request in list(self._open_requests)))
        if self._owns_engine:
            self._engine.close()

    def _open_engine_stream(self) -> Any:
        try:
            return self._engine.stream(sample_rate=self.sample_rate, **self._options)
        except libetude.EtudeError as error:
            # A local engine refuses the same options on every attempt.
            raise APIError(f"cannot open a LibEtude stream: {error}", retryable=False) from error


def _checked_rate(engine: libetude.Engine, options: dict[str, Any]) -> int:
    """The voice's own rate, from a stream opened with `options`: an unknown
    voice or an option the voice does not take is refused here, rather than
    at the first reply (libetude.InvalidArgument)."""
    with engine.stream(**options) as probe:
        return int(probe.sample_rate)


def _engine_call(method: Any, *args: Any) -> None:
    try:
        method(*args)
    except libetude.EtudeError as error:
        raise APIError(f"LibEtude refused the text: {error}", retryable=False) from error


class _WordAligner:
    """The text pushed to one engine stream, cut at the words the engine
    marks into TimedStrings: each word's piece runs from the end of the word
    before it to its own end (the spaces and punctuation before a word go
    with it; the text after the last word is a piece of its own at the end),
    so that together they are the text as pushed, which LiveKit shows as the
    transcript in step with the audio. A word's piece goes out as soon as
    its mark comes, after the audio block the word starts in. A word the
    engine did not mark (a Piper sentence whose words it could not pair)
    goes with the next word marked, or with the end."""

    def __init__(self, text: str = "") -> None:
        self.text = text
        self._done = 0  # the text before this is in a piece already
        self._last_seconds: float | None = None  # the last word's time

    def word(self, mark: libetude.Mark) -> TimedString | None:
        """This word's piece: from the end of the piece before to its end."""
        at = self.text.find(mark.name, self._done)
        if at < 0:
            return None  # not in the text (never expected): its time is lost
        end = at + len(mark.name)
        piece = TimedString(self.text[self._done:end], start_time=mark.seconds)
        self._done = end
        self._last_seconds = mark.seconds
        return piece

    def finish(self) -> TimedString | None:
        """What follows the last word, timed at it; None when nothing does,
        or with no words (LiveKit then shows the text without timings)."""
        if self._last_seconds is None or self._done >= len(self.text):
            return None
        piece = TimedString(self.text[self._done:], start_time=self._last_seconds)
        self._done = len(self.text)
        return piece


async def _emit_audio(
    engine_stream: Any, output_emitter: tts.AudioEmitter, words: _WordAligner
) -> None:
    """Push every block of ``engine_stream`` to ``output_emitter`` as 16-bit
    PCM, and each word's piece of the transcript after the block it starts in.

    Cancels the engine stream when the iteration is left early (the request
    was closed), so the engine stops vocoding audio nobody will hear.
    """
    finished = False
    heard = HeardWords(engine_stream)
    try:
        async for block in engine_stream:
            output_emitter.push(to_pcm16(block))
            for mark in heard.after_block(len(block)):
                piece = words.word(mark)
                if piece is not None:
                    output_emitter.push_timed_transcript(piece)
        for mark in heard.rest():
            piece = words.word(mark)
            if piece is not None:
                output_emitter.push_timed_transcript(piece)
        last = words.finish()
        if last is not None:
            output_emitter.push_timed_transcript(last)
        finished = True
    except libetude.EtudeError as error:
        finished = True
        raise APIError(f"LibEtude failed to speak: {error}", retryable=False) from error
    finally:
        if not finished:
            engine_stream.cancel()


async def _emit_segment(
    engine_stream: Any, output_emitter: tts.AudioEmitter, words: _WordAligner
) -> None:
    await _emit_audio(engine_stream, output_emitter, words)
    output_emitter.end_segment()


class EtudeChunkedStream(tts.ChunkedStream):
    """The audio of one ``EtudeTTS.synthesize()`` call."""

    def __init__(self, *, tts: EtudeTTS, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._tts: EtudeTTS = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=utils.shortuuid(),
            sample_rate=self._tts.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        with self._tts._open_engine_stream() as engine_stream:
            engine_stream.report_words()
            _engine_call(engine_stream.push_text, self.input_text)
            _engine_call(engine_stream.end_input)
            await _emit_audio(engine_stream, output_emitter, _WordAligner(self.input_text))
        # No flush here: the base class ends the segment, which sends the
        # held-back tail as the final frame. A flush first would release that
        # tail early and make LiveKit append a 10 ms silent marker instead.


class EtudeSynthesizeStream(tts.SynthesizeStream):
    """Text pushed by an agent, spoken by one LibEtude stream.

    ``push_text`` pieces go to the engine as they come. LiveKit's ``flush``
    ends the segment (LiveKit drops text pushed after it), so it ends the
    engine's input; ``end_input`` does the same if no flush came first.
    """

    def __init__(self, *, tts: EtudeTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._tts: EtudeTTS = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        output_emitter.initialize(
            request_id=utils.shortuuid(),
            sample_rate=self._tts.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        with self._tts._open_engine_stream() as engine_stream:
            engine_stream.report_words()
            feed = _Feed(engine_stream, output_emitter, self)
            # The input is read by a task of its own, so that speech that
            # fails while the agent has yet to end its input is raised now,
            # not once the input ends (which an agent waiting on the audio
            # might never do).
            reading = asyncio.create_task(feed.read_input())
            try:
                await asyncio.wait({reading, feed.failure}, return_when=asyncio.FIRST_COMPLETED)
                if feed.failure.done():
                    raise feed.failure.exception()  # type: ignore[misc]
                reading.result()  # a refused piece of text raises here
                if feed.audio is not None:
                    await feed.audio
            finally:
                # Closing the request cancels this task; the input's reader
                # and the audio's go with it, and the audio reader's cleanup
                # cancels the engine stream.
                await utils.aio.cancel_and_wait(reading)
                if feed.audio is not None:
                    await utils.aio.cancel_and_wait(feed.audio)
                if feed.failure.done():
                    feed.failure.exception()  # raised above or by the audio's await: seen
                else:
                    feed.failure.cancel()


class _Feed:
    """The text of one EtudeSynthesizeStream into its engine stream, and the
    task that reads the engine's audio once there is text."""

    def __init__(
        self, engine_stream: Any, output_emitter: tts.AudioEmitter, request: EtudeSynthesizeStream
    ) -> None:
        self._engine_stream = engine_stream
        self._output_emitter = output_emitter
        self._request = request
        self._words = _WordAligner()
        self.audio: asyncio.Task[None] | None = None
        # What the audio's reader raised, set the moment it fails.
        self.failure: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def _note_failure(self, audio: asyncio.Task[None]) -> None:
        if not audio.cancelled() and audio.exception() is not None and not self.failure.done():
            self.failure.set_exception(audio.exception())  # type: ignore[arg-type]

    async def read_input(self) -> None:
        request, engine_stream = self._request, self._engine_stream
        input_ended = False
        async for item in request._input_ch:
            if isinstance(item, request._FlushSentinel):
                # A flush before any text ends nothing.
                if self.audio is not None and not input_ended:
                    _engine_call(engine_stream.end_input)
                    input_ended = True
                continue
            if input_ended:
                continue
            _engine_call(engine_stream.push_text, item)
            self._words.text += item
            if self.audio is None:
                # Read only once the engine has text: reading a stream that
                # has none yet ends at once.
                self._output_emitter.start_segment(segment_id=utils.shortuuid())
                request._mark_started()
                self.audio = asyncio.create_task(
                    _emit_segment(engine_stream, self._output_emitter, self._words)
                )
                self.audio.add_done_callback(self._note_failure)
        if not input_ended:
            _engine_call(engine_stream.end_input)
