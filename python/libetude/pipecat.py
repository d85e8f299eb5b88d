"""LibEtude as a Pipecat text-to-speech service.

    pip install "libetude[pipecat]"

``EtudeTTSService`` speaks each piece of text Pipecat hands it (a sentence, by
default) through one LibEtude stream and passes the audio on block by block
while the engine makes it, so the first words play before the rest of the
sentence is vocoded. An interruption cancels the stream that is speaking: the
engine fades out within 5 ms and drops what was queued.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import field, make_dataclass
from typing import Any

try:
    from pipecat.frames.frames import CancelFrame, ErrorFrame, Frame, TTSAudioRawFrame
    from pipecat.services.settings import TTSSettings
    from pipecat.services.tts_service import TTSService
    from pipecat.utils.tracing.service_decorators import traced_tts
    from pipecat.utils.types import NOT_GIVEN, is_given
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        "libetude.pipecat needs Pipecat; install it with: pip install 'libetude[pipecat]'"
    ) from error

import libetude
from libetude._pcm import to_pcm16  # the package's one float-to-16-bit rule
from libetude._words import HeardWords

__all__ = ["EtudeTTSService", "EtudeTTSSettings"]


def _not_given() -> Any:
    return NOT_GIVEN


# Every keyword option of Engine.stream() (the engine's table) is a setting
# of the same name; the sample rate is the pipeline's, and the voice is
# TTSSettings' own.
_STREAM_SETTINGS = tuple(name for name in libetude.STREAM_OPTIONS if name != "sample_rate")

EtudeTTSSettings = make_dataclass(
    "EtudeTTSSettings",
    [(name, Any, field(default_factory=_not_given)) for name in _STREAM_SETTINGS],
    bases=(TTSSettings,),
    namespace={
        "__module__": __name__,
        "__doc__": """Settings of ``EtudeTTSService`` that may change while a pipeline runs.

    A change applies from the next piece of text on, since every piece is
    spoken by a stream of its own. Besides TTSSettings' own (``voice``),
    each of ``Engine.stream``'s keyword options (``libetude.STREAM_OPTIONS``:
    ``speaker``, ``length_scale``, ``noise_scale``, ``noise_w``, ``seed``,
    ``latency_ms``, ...) is a setting of the same name; ``None`` keeps the
    option's default.
    """,
    },
)


class EtudeTTSService(TTSService):
    """Pipecat ``TTSService`` that synthesizes on this machine with LibEtude.

    The service's sample rate is the engine's output rate (the engine
    resamples), so frames need no resampling; audio is mono 16-bit PCM.
    """

    Settings = EtudeTTSSettings
    _settings: Any  # an EtudeTTSSettings

    def __init__(
        self,
        *,
        engine: libetude.Engine | None = None,
        voice: str = "slt",
        sample_rate: int | None = None,
        settings: Any = None,
        **kwargs: Any,
    ):
        """Create the service.

        Args:
            engine: An engine to share with other services or streams; a new
                one is made when omitted, closed at the pipeline's cleanup
                and made again if the service speaks after it (a given one
                stays open: its owner closes it).
            voice: A built-in voice ("slt", "rms", "awb") or a Piper voice's
                name or path, as ``Engine.stream`` takes it.
            sample_rate: Output rate in Hz; None takes the pipeline's output rate.
            settings: An ``EtudeTTSSettings`` whose given values take
                precedence over the arguments.
            **kwargs: ``Engine.stream``'s keyword options by name
                (``libetude.STREAM_OPTIONS``: ``speaker``, ``length_scale``,
                ``noise_scale``, ``noise_w``, ``seed``, ...), each the
                setting of that name; the rest is passed on to Pipecat's
                ``TTSService``.
        """
        options = {name: kwargs.pop(name) for name in list(kwargs) if name in _STREAM_SETTINGS}
        store = self.Settings(
            model=None,
            voice=voice,
            language=None,
            **{name: options.get(name) for name in _STREAM_SETTINGS},
        )
        if settings is not None:
            store.apply_update(settings)

        # The base class opens the audio context with TTSStartedFrame before
        # run_tts and closes it with TTSStoppedFrame when the turn is spoken,
        # so the frames of one reply keep one context.
        # Each word's TTSTextFrame comes from the engine's word marks, timed
        # where the word is heard (push_text_frames=False: the base class then
        # emits the reply's text word by word as the audio reaches each one,
        # and completes any word the engine could not time at the end).
        super().__init__(
            push_text_frames=False,
            push_start_frame=True,
            push_stop_frames=True,
            sample_rate=sample_rate,
            settings=store,
            **kwargs,
        )
        if self._is_streaming_tokens:
            # Each piece of text gets a stream of its own, so token by token
            # every token would be spoken as an utterance of its own.
            raise ValueError(
                "EtudeTTSService speaks whole sentences; use "
                "text_aggregation_mode=TextAggregationMode.SENTENCE (the default)"
            )
        self._owns_engine = engine is None
        self._engine = engine if engine is not None else libetude.Engine()
        # A stream opened now refuses an unknown voice or an option the voice
        # does not take here, rather than at the first reply.
        self._engine.stream(**self._voice_options()).close()
        # Streams still speaking, by audio context, so an interruption can
        # cancel them even when run_tts is not the code that is waiting.
        self._speaking: dict[str, set[Any]] = {}
        # Seconds of audio each context has sent so far: a sentence's word
        # times count from the first audio of its reply, not of its stream.
        self._context_seconds: dict[str, float] = {}

    @property
    def engine(self) -> libetude.Engine:
        """The engine this service synthesizes with."""
        return self._engine

    def can_generate_metrics(self) -> bool:
        """Time-to-first-byte and usage metrics are reported."""
        return True

    def _voice_options(self) -> dict[str, Any]:
        # None keeps the engine's default for the option.
        options: dict[str, Any] = {}
        for name in ("voice", *_STREAM_SETTINGS):
            value = getattr(self._settings, name)
            if is_given(value) and value is not None:
                options[name] = value
        return options

    async def _update_settings(self, delta: Any) -> dict[str, Any]:
        """Apply a settings update (``TTSUpdateSettingsFrame``) only if a
        stream opens with it, as the constructor checks its options: a voice
        the engine does not have, or an option the voice does not take, is
        an error now (pushed upstream) and the settings stay as they were,
        rather than every later sentence failing."""
        changed = await super()._update_settings(delta)
        if not changed or (self._owns_engine and self._engine.closed):
            return changed
        try:
            self._engine.stream(**self._voice_options()).close()
        except libetude.EtudeError as error:
            for name, previous in changed.items():
                setattr(self._settings, name, previous)
            await self.push_error(f"{self}: settings not changed: {error}")
            return {}
        return changed

    # A "tts" span per audio context when the pipeline traces
    # (PipelineWorker(enable_tracing=True) with OpenTelemetry installed), as
    # Pipecat's own services have; nothing otherwise.
    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame, None]:
        """Speak ``text`` through one LibEtude stream, yielding audio as it is made.

        Args:
            text: The text to speak: a sentence of an LLM's reply, or the
                whole text of a TTSSpeakFrame.
            context_id: The audio context the frames belong to.

        Yields:
            TTSAudioRawFrame per block the engine makes, or an ErrorFrame.
        """
        await self.start_tts_usage_metrics(text)
        if self._owns_engine and self._engine.closed:
            # Cleaned up and started again: the service makes its engine anew.
            self._engine = libetude.Engine()
        try:
            stream = self._engine.stream(sample_rate=self.sample_rate, **self._voice_options())
        except libetude.EtudeError as error:
            yield ErrorFrame(error=f"{self}: cannot open a LibEtude stream: {error}")
            return

        speaking = self._speaking.setdefault(context_id, set())
        speaking.add(stream)
        finished = False
        offset = self._context_seconds.get(context_id, 0.0)
        words = HeardWords(stream)
        try:
            stream.report_words(True)
            stream.push_text(text)
            stream.end_input()
            async for block in stream:
                if stream not in speaking:
                    break  # interrupted: the fade's blocks are not wanted
                await self.stop_ttfb_metrics()
                yield TTSAudioRawFrame(
                    audio=to_pcm16(block),
                    sample_rate=self.sample_rate,
                    num_channels=1,
                    context_id=context_id,
                )
                heard = words.after_block(len(block))
                if heard:
                    await self.add_word_timestamps(
                        [(m.name, offset + m.seconds) for m in heard], context_id
                    )
            if stream in speaking:
                # Words whose audio has all been sent but that the last
                # block's count did not reach (as the LiveKit adapter does).
                rest = words.rest()
                if rest:
                    await self.add_word_timestamps(
                        [(m.name, offset + m.seconds) for m in rest], context_id
                    )
            finished = True
        except libetude.EtudeError as error:
            finished = True
            yield ErrorFrame(error=f"{self}: LibEtude failed to speak [{text}]: {error}")
        finally:
            # Reached without finishing when the task was cancelled (an
            # interruption) or the generator was dropped: stop the engine now
            # rather than let it vocode audio nobody will play.
            if not finished:
                stream.cancel()
            self._context_seconds[context_id] = offset + words.sent / self.sample_rate
            stream.close()
            speaking.discard(stream)
            if not speaking and self._speaking.get(context_id) is speaking:
                del self._speaking[context_id]

    async def on_audio_context_completed(self, context_id: str):
        """Forget a finished reply's running time."""
        self._context_seconds.pop(context_id, None)
        await super().on_audio_context_completed(context_id)

    async def on_audio_context_interrupted(self, context_id: str):
        """Cancel the streams speaking into an interrupted audio context."""
        self._context_seconds.pop(context_id, None)
        streams = self._speaking.pop(context_id, set())
        for stream in streams:
            stream.cancel()
        streams.clear()
        await super().on_audio_context_interrupted(context_id)

    async def cancel(self, frame: CancelFrame):
        """Cancel every stream still speaking when the pipeline is cancelled."""
        self._cancel_all()
        await super().cancel(frame)

    async def cleanup(self):
        """Cancel every stream still speaking at teardown, and close the
        engine if the service made it (its threads and voices go with it)."""
        self._cancel_all()
        try:
            await super().cleanup()
        finally:
            if self._owns_engine:
                self._engine.close()

    def _cancel_all(self) -> None:
        self._context_seconds.clear()
        speaking, self._speaking = self._speaking, {}
        for streams in speaking.values():
            for stream in streams:
                stream.cancel()
            streams.clear()
