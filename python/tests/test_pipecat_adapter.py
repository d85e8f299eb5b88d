"""EtudeTTSService driven through a real Pipecat pipeline.

The service sits in a Pipeline run by a PipelineWorker, as in an application;
a collector behind it records every frame it pushes and when.
"""

import asyncio
import time

import numpy as np
import pytest

pytest.importorskip(
    "pipecat", reason="pipecat-ai is not installed (python/test-requirements.txt pins it)"
)

from pipecat.frames.frames import (  # noqa: E402
    EndFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.services.tts_service import TextAggregationMode  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402

import libetude  # noqa: E402
from libetude._pcm import to_pcm16  # noqa: E402
from libetude.pipecat import EtudeTTSService  # noqa: E402
from recording import RecordingEngine  # noqa: E402  (python/tests/recording.py)

VOICE = "slt"
RATE = 16000
TEXT = (
    "The first sentence is short. "
    "The second one goes on a little longer, so that there is more to say. "
    "A third sentence follows it, and then a fourth, to make the reply long enough "
    "that streaming it clearly pays off."
)
# Long enough (about a minute and a half of speech) that the engine is still
# speaking when the interruption comes, however fast this machine vocodes.
LONG_TEXT = " ".join([TEXT] * 7)


class FrameCollector(FrameProcessor):
    """Records the frames that leave the service, with their arrival times."""

    def __init__(self):
        super().__init__(enable_direct_mode=True)
        self.frames = []  # (seconds since start, frame)
        self.first_audio = asyncio.Event()
        self.started_at = time.perf_counter()

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM and not isinstance(frame, StartFrame):
            self.frames.append((time.perf_counter() - self.started_at, frame))
            if isinstance(frame, TTSAudioRawFrame):
                self.first_audio.set()
        await self.push_frame(frame, direction)

    def of_type(self, frame_type):
        return [(at, frame) for at, frame in self.frames if isinstance(frame, frame_type)]


def reference_pcm(engine, text, voice=VOICE, sample_rate=RATE, **options):
    """The whole-utterance render, in the int16 steps the service sends."""
    audio = engine.synthesize(text, voice=voice, sample_rate=sample_rate, **options)
    return np.frombuffer(to_pcm16(audio), dtype="<i2")


def streamed_pcm(collector):
    blocks = [
        np.frombuffer(frame.audio, dtype="<i2") for _, frame in collector.of_type(TTSAudioRawFrame)
    ]
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype="<i2")


def speak(service, text, *, interrupt_after_first_audio=False, enable_tracing=False):
    """Run a pipeline that speaks ``text`` and return the collector.

    ``text`` is a string (sent as one TTSSpeakFrame) or a list of frames.
    """
    frames = [TTSSpeakFrame(text)] if isinstance(text, str) else text

    async def main():
        collector = FrameCollector()
        worker = PipelineWorker(
            Pipeline([service, collector]),
            params=PipelineParams(audio_out_sample_rate=RATE),
            cancel_on_idle_timeout=False,
            enable_tracing=enable_tracing,
        )
        started = asyncio.Event()

        @worker.event_handler("on_pipeline_started")
        async def on_pipeline_started(worker, frame):
            started.set()

        async def drive():
            await asyncio.wait_for(started.wait(), timeout=10)
            collector.started_at = time.perf_counter()
            await worker.queue_frames(frames)
            if interrupt_after_first_audio:
                await asyncio.wait_for(collector.first_audio.wait(), timeout=30)
                await worker.queue_frame(InterruptionFrame())
                # Give a stream that failed to stop the time to show it.
                await asyncio.sleep(0.5)
            await worker.queue_frame(EndFrame())

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await asyncio.wait_for(asyncio.gather(runner.run(), drive()), timeout=120)
        return collector

    return asyncio.run(main())


def test_streamed_audio_equals_whole_render(engine):
    recording = RecordingEngine(engine)
    service = EtudeTTSService(engine=recording, voice=VOICE, sample_rate=RATE)
    recording.streams.clear()  # the stream construction opened to check the voice
    collector = speak(service, TEXT)

    audio_frames = collector.of_type(TTSAudioRawFrame)
    assert audio_frames, "the service pushed no audio"
    for _, frame in audio_frames:
        assert frame.sample_rate == RATE
        assert frame.num_channels == 1
        assert len(frame.audio) % 2 == 0  # whole 16-bit samples

    expected = reference_pcm(engine, TEXT)
    got = streamed_pcm(collector)
    assert len(got) == len(expected)
    assert np.max(np.abs(got.astype(np.int32) - expected.astype(np.int32))) <= 1
    # One engine stream spoke the whole text, and nothing cancelled it.
    assert len(recording.streams) == 1
    assert recording.streams[0].stats_at_close.cancels == 0


def test_llm_reply_in_tokens_is_spoken_sentence_by_sentence(engine):
    # As an LLM service sends it: a response of small tokens, cut mid-word.
    recording = RecordingEngine(engine)
    service = EtudeTTSService(engine=recording, voice=VOICE, sample_rate=RATE)
    recording.streams.clear()  # the stream construction opened to check the voice
    tokens = [TEXT[i : i + 4] for i in range(0, len(TEXT), 4)]
    frames = [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]
    collector = speak(service, frames)

    # Pipecat cut the reply into its three sentences, each spoken by a stream.
    spoken = [stream.text for stream in recording.streams]
    assert len(spoken) == 3
    assert " ".join(text.strip() for text in spoken) == TEXT
    expected = np.concatenate([reference_pcm(engine, text) for text in spoken])
    got = streamed_pcm(collector)
    assert len(got) == len(expected)
    assert np.max(np.abs(got.astype(np.int32) - expected.astype(np.int32))) <= 1

    # One reply: one TTSStartedFrame and one TTSStoppedFrame around all of it.
    assert len(collector.of_type(TTSStartedFrame)) == 1
    assert len(collector.of_type(TTSStoppedFrame)) == 1


def test_each_word_is_a_text_frame_timed_where_it_is_heard(engine):
    # Pipecat's transcript of what was spoken: a TTSTextFrame per word, in
    # order, whose PTS is where the engine reported the word's start (word
    # times count from the reply's first audio, across its sentences).
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    frames = [LLMFullResponseStartFrame(), LLMTextFrame(TEXT), LLMFullResponseEndFrame()]
    collector = speak(service, frames)
    words = [frame for _, frame in collector.of_type(TTSTextFrame)]
    # The frame's text is the engine's word; Pipecat keeps the reply's own
    # text around it (punctuation included) as raw_text for the context.
    assert [w.text for w in words] == [t.strip(".,") for t in TEXT.split()]
    assert [w.raw_text for w in words] == TEXT.split()
    pts = [w.pts for w in words]
    assert all(p is not None for p in pts)
    assert pts == sorted(pts) and pts[0] < pts[-1]
    # The last word starts before the audio ends, the first after it starts.
    audio_seconds = len(streamed_pcm(collector)) / RATE
    assert (pts[-1] - pts[0]) / 1e9 < audio_seconds
    # Against the engine: the third sentence's first word starts after the
    # audio of the first two sentences.
    with engine.stream(voice=VOICE, sample_rate=RATE) as s:
        s.report_words()
        first_two = TEXT[: TEXT.index("A third")]
        s.push_text(first_two.strip())
        s.end_input()
        two = sum(len(b) for b in s)
    third = next(i for i, w in enumerate(words) if w.text.startswith("A") and i > 5)
    assert (pts[third] - pts[0]) / 1e9 >= two / RATE - 0.5


def test_a_traced_pipeline_gets_a_tts_span_with_the_text_and_voice(engine):
    # As Pipecat's own services (@traced_tts): one "tts" span per audio
    # context, with the text spoken and the voice.
    trace = pytest.importorskip("opentelemetry.trace")
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = in_memory.InMemorySpanExporter()
    # The process's provider can be set once: this test's, or the SDK
    # provider something set before it, records into the exporter.
    if not isinstance(trace.get_tracer_provider(), sdk.TracerProvider):
        trace.set_tracer_provider(sdk.TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, sdk.TracerProvider), provider
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    collector = speak(service, TEXT, enable_tracing=True)
    assert collector.of_type(TTSAudioRawFrame)
    spans = [span for span in exporter.get_finished_spans() if span.name == "tts"]
    assert len(spans) == 1, [span.name for span in exporter.get_finished_spans()]
    assert spans[0].attributes["text"] == TEXT
    assert spans[0].attributes["voice_id"] == VOICE


def test_piper_voice_options_pass_through(engine, joe_model):
    options = dict(seed=7, length_scale=1.1, noise_scale=0.5)
    service = EtudeTTSService(engine=engine, voice=joe_model, sample_rate=RATE, **options)
    text = "A natural voice, speaking at the pipeline's rate."
    collector = speak(service, text)

    expected = reference_pcm(engine, text, voice=joe_model, **options)
    got = streamed_pcm(collector)
    assert len(got) == len(expected)
    assert np.max(np.abs(got.astype(np.int32) - expected.astype(np.int32))) <= 1


def test_audio_is_framed_by_started_and_stopped(engine):
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    collector = speak(service, TEXT)

    kinds = [
        type(frame)
        for _, frame in collector.frames
        if isinstance(frame, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))
    ]
    assert kinds[0] is TTSStartedFrame
    assert kinds[-1] is TTSStoppedFrame
    assert kinds.count(TTSStartedFrame) == 1 and kinds.count(TTSStoppedFrame) == 1
    assert kinds.count(TTSAudioRawFrame) > 1  # blocks, not one frame for the whole reply


def test_first_audio_arrives_long_before_the_last(engine):
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    collector = speak(service, TEXT)

    audio_times = [at for at, _ in collector.of_type(TTSAudioRawFrame)]
    first, last = audio_times[0], audio_times[-1]
    # Synthesize-then-yield would push every frame at about the same moment.
    assert first < 0.5 * last, f"first audio at {first:.3f} s, last at {last:.3f} s"


def test_interruption_cancels_the_stream_and_stops_the_audio(engine):
    recording = RecordingEngine(engine)
    service = EtudeTTSService(engine=recording, voice=VOICE, sample_rate=RATE)
    recording.streams.clear()  # the stream construction opened to check the voice
    collector = speak(service, LONG_TEXT, interrupt_after_first_audio=True)

    interrupted_at = next(
        index
        for index, (_, frame) in enumerate(collector.frames)
        if isinstance(frame, InterruptionFrame)
    )
    after = [
        frame
        for _, frame in collector.frames[interrupted_at:]
        if isinstance(frame, TTSAudioRawFrame)
    ]
    assert not after, f"{len(after)} audio frame(s) after the interruption"

    assert len(recording.streams) == 1
    stats = recording.streams[0].stats_at_close
    assert stats.cancels >= 1
    # The engine stopped early: far less was read than the text holds.
    assert stats.samples_delivered < len(reference_pcm(engine, LONG_TEXT)) // 2


def test_token_aggregation_is_refused(engine):
    # Token by token, each token would be spoken as an utterance of its own.
    with pytest.raises(ValueError, match="SENTENCE"):
        EtudeTTSService(engine=engine, text_aggregation_mode=TextAggregationMode.TOKEN)


def test_bad_voice_options_are_refused_at_construction(engine):
    with pytest.raises(libetude.EtudeError, match="no-such-voice"):
        EtudeTTSService(engine=engine, voice="no-such-voice")
    with pytest.raises(libetude.EtudeError, match="seed"):
        EtudeTTSService(engine=engine, voice=VOICE, seed=7)  # a Piper voice's option


def test_an_engine_the_service_made_is_closed_at_cleanup_and_a_given_one_is_not(engine):
    own = EtudeTTSService(voice=VOICE, sample_rate=RATE)
    collector = speak(own, "Hello there.")
    assert len(streamed_pcm(collector)) > 0
    assert own.engine.closed
    # Asked to speak after its cleanup (Pipecat's processors keep to their
    # first event loop, so run_tts is called as the base class calls it), the
    # service makes its engine anew.

    async def again():
        return b"".join([f.audio async for f in own.run_tts("Hello there.", "again")])

    assert len(asyncio.run(again())) == 2 * len(streamed_pcm(collector))
    assert not own.engine.closed
    shared = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    speak(shared, "Hello there.")
    assert not engine.closed


def test_a_settings_update_the_engine_refuses_leaves_the_settings_as_they_were(engine):
    # Checked as the constructor checks its options: the unknown voice is an
    # error at the update, and the next sentence speaks with the voice before.
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    bad = TTSUpdateSettingsFrame(delta=EtudeTTSService.Settings(voice="no-such-voice"))
    collector = speak(service, [bad, TTSSpeakFrame("Hello there.")])
    assert service._settings.voice == VOICE
    got = streamed_pcm(collector)
    expected = reference_pcm(engine, "Hello there.")
    assert len(got) == len(expected) and np.array_equal(got, expected)
    # A good update still applies (a service of its own: Pipecat's processors
    # keep to their first event loop).
    service = EtudeTTSService(engine=engine, voice=VOICE, sample_rate=RATE)
    good = TTSUpdateSettingsFrame(delta=EtudeTTSService.Settings(voice="rms"))
    collector = speak(service, [good, TTSSpeakFrame("Hello there.")])
    assert service._settings.voice == "rms"
    assert np.array_equal(streamed_pcm(collector), reference_pcm(engine, "Hello there.", voice="rms"))
