"""EtudeTTS driven as LiveKit Agents drives a TTS plugin, without a server.

An agent's TTS node calls ``tts.stream()``, pushes the LLM's text as it comes
and ends the input; ``synthesize()`` is the one-shot path. Both run standalone
in an event loop.
"""

import asyncio
import time

import numpy as np
import pytest

pytest.importorskip(
    "livekit.agents",
    reason="livekit-agents is not installed (python/test-requirements.txt pins it)",
)

from livekit.agents import APIConnectOptions, APIError  # noqa: E402
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT  # noqa: E402

import libetude  # noqa: E402
from libetude._pcm import to_pcm16  # noqa: E402
from libetude.livekit import EtudeTTS  # noqa: E402
from recording import RecordingEngine  # noqa: E402  (python/tests/recording.py)

VOICE = "slt"
RATE = 16000
TEXT = (
    "The first sentence is short. "
    "The second one goes on a little longer, so that there is more to say. "
    "A third sentence ends the reply."
)
# Long enough that the engine is still speaking when the request is closed,
# however fast this machine vocodes.
LONG_TEXT = " ".join([TEXT] * 12)


def reference_pcm(engine, text, voice=VOICE, sample_rate=RATE, **options):
    """The whole-utterance render, in the int16 steps the plugin emits."""
    audio = engine.synthesize(text, voice=voice, sample_rate=sample_rate, **options)
    return np.frombuffer(to_pcm16(audio), dtype="<i2")


def pieces(text, size):
    """``text`` cut every ``size`` characters, mid-word and mid-sentence."""
    return [text[i : i + size] for i in range(0, len(text), size)]


async def collect(request, rate=RATE):
    frames = [event.frame async for event in request]
    for frame in frames:
        assert frame.sample_rate == rate
        assert frame.num_channels == 1
    samples = [np.frombuffer(frame.data, dtype=np.int16) for frame in frames]
    return np.concatenate(samples) if samples else np.zeros(0, dtype=np.int16)


def assert_same_audio(got, expected, rate=RATE):
    # LiveKit may end a segment with a 10 ms silent marker when its playout
    # timer released the last frame early (slow synthesis); that is LiveKit's,
    # not the engine's, so it is allowed here and nothing else is.
    extra = got[len(expected) :]
    assert len(extra) in (0, rate // 100), f"{len(got)} samples, expected {len(expected)}"
    assert not extra.any()
    got = got[: len(expected)]
    assert len(got) == len(expected)
    assert np.max(np.abs(got.astype(np.int32) - expected.astype(np.int32))) <= 1


def test_capabilities_say_streaming(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)
    assert tts.capabilities.streaming
    assert tts.capabilities.aligned_transcript
    assert tts.sample_rate == RATE and tts.num_channels == 1


def test_stream_of_pieces_equals_whole_render(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)

    async def main():
        async with tts.stream() as stream:
            for piece in pieces(TEXT, 7):
                stream.push_text(piece)
                await asyncio.sleep(0)  # let the pieces arrive apart, as an LLM's do
            stream.end_input()
            return await collect(stream)

    assert_same_audio(asyncio.run(main()), reference_pcm(engine, TEXT))


def test_stream_read_before_any_text_waits_for_it(engine):
    # As an agent's TTS node does: the reader starts first, the LLM's text
    # comes later.
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)
    errors = []
    tts.on("error", errors.append)

    async def main():
        # No retry: LiveKit replays the text into a second attempt, which
        # would hide a first attempt that lost it.
        async with tts.stream(conn_options=APIConnectOptions(max_retry=0)) as stream:
            reader = asyncio.create_task(collect(stream))
            await asyncio.sleep(0.2)
            for piece in pieces(TEXT, 9):
                stream.push_text(piece)
                await asyncio.sleep(0.01)
            stream.end_input()
            return await reader

    assert_same_audio(asyncio.run(main()), reference_pcm(engine, TEXT))
    assert not errors


def test_stream_emits_audio_while_the_engine_speaks(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)

    async def main():
        times = []
        async with tts.stream() as stream:
            started = time.perf_counter()
            stream.push_text(LONG_TEXT)
            stream.end_input()
            async for _ in stream:
                times.append(time.perf_counter() - started)
        return times

    times = asyncio.run(main())
    # Synthesize-then-emit would deliver every frame at about the same moment.
    assert times[0] < 0.5 * times[-1], f"first audio at {times[0]:.3f} s, last at {times[-1]:.3f} s"


def test_bad_voice_options_are_refused_at_construction(engine):
    with pytest.raises(libetude.EtudeError, match="no-such-voice"):
        EtudeTTS(engine=engine, voice="no-such-voice")
    with pytest.raises(libetude.EtudeError, match="seed"):
        EtudeTTS(engine=engine, voice=VOICE, seed=7)  # a Piper voice's option


def test_flush_then_end_input_speaks_everything(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)

    async def main():
        async with tts.stream() as stream:
            for piece in pieces(TEXT, 11):
                stream.push_text(piece)
            stream.flush()
            stream.end_input()
            return await collect(stream)

    assert_same_audio(asyncio.run(main()), reference_pcm(engine, TEXT))


class EngineThatFailsMidway:
    """An engine whose streams raise, as the engine does when speech fails,
    after their first block of audio."""

    def __init__(self, engine):
        self._engine = engine

    def stream(self, **options):
        return StreamThatFailsMidway(self._engine.stream(**options))

    def __getattr__(self, name):
        return getattr(self._engine, name)


class StreamThatFailsMidway:
    def __init__(self, stream):
        self._stream = stream

    async def __aiter__(self):
        async for block in self._stream:
            yield block
            raise libetude.InternalError("the voice failed (a test's fault)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stream.close()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def test_speech_that_fails_while_input_is_open_is_raised_at_once(engine):
    # An agent that has not ended its input (the LLM still talking, or the
    # agent waiting for audio before it goes on) hears of the failure now;
    # before, it was raised only once the input ended.
    tts = EtudeTTS(engine=EngineThatFailsMidway(engine), voice=VOICE, sample_rate=RATE)
    errors = []
    tts.on("error", errors.append)

    async def main():
        async with tts.stream(conn_options=APIConnectOptions(max_retry=0)) as stream:
            stream.push_text(TEXT)
            with pytest.raises(APIError, match="the voice failed"):
                await asyncio.wait_for(collect(stream), timeout=30)

    asyncio.run(main())
    assert len(errors) == 1 and not errors[0].recoverable


def test_piper_voice_at_its_own_rate_with_options(engine, joe_model):
    options = dict(seed=7, length_scale=1.1, noise_scale=0.5)
    tts = EtudeTTS(engine=engine, voice=joe_model, **options)
    own_rate = engine.describe_voice(joe_model).sample_rate
    assert tts.sample_rate == own_rate
    text = "A natural voice, speaking at its own rate."

    async def main():
        async with tts.stream() as stream:
            for piece in pieces(text, 5):
                stream.push_text(piece)
            stream.end_input()
            return await collect(stream, own_rate)

    expected = reference_pcm(engine, text, voice=joe_model, sample_rate=None, **options)
    assert_same_audio(asyncio.run(main()), expected, own_rate)


def test_synthesize_equals_whole_render(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)

    async def main():
        async with tts.synthesize(TEXT) as request:
            return await collect(request)

    assert_same_audio(asyncio.run(main()), reference_pcm(engine, TEXT))


def test_aclose_midway_cancels_the_engine_stream(engine):
    recording = RecordingEngine(engine)
    tts = EtudeTTS(engine=recording, voice=VOICE, sample_rate=RATE)
    recording.streams.clear()  # the stream construction opened to check the voice

    async def main():
        stream = tts.stream()
        stream.push_text(LONG_TEXT)
        stream.end_input()
        first = await asyncio.wait_for(stream.__anext__(), timeout=30)
        assert first.frame.samples_per_channel > 0
        await asyncio.wait_for(stream.aclose(), timeout=5)

    asyncio.run(main())
    assert len(recording.streams) == 1
    stats = recording.streams[0].stats_at_close
    assert stats.cancels >= 1
    assert stats.samples_delivered < len(reference_pcm(engine, LONG_TEXT)) // 2


def test_tts_aclose_closes_open_requests(engine):
    recording = RecordingEngine(engine)
    tts = EtudeTTS(engine=recording, voice=VOICE, sample_rate=RATE)
    recording.streams.clear()  # the stream construction opened to check the voice

    async def main():
        request = tts.synthesize(LONG_TEXT)
        await asyncio.wait_for(request.__anext__(), timeout=30)
        await asyncio.wait_for(tts.aclose(), timeout=5)

    asyncio.run(main())
    assert len(recording.streams) == 1
    assert recording.streams[0].stats_at_close.cancels >= 1


async def timed_transcript(request):
    """The TimedStrings LiveKit attached to the request's frames, in order,
    and the seconds of audio before each one's frame."""
    pieces, seconds = [], 0.0
    async for event in request:
        for piece in event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, []):
            pieces.append((piece, seconds))
        seconds += event.frame.samples_per_channel / event.frame.sample_rate
    return pieces


@pytest.mark.parametrize("streamed", [False, True])
def test_aligned_transcript_is_the_text_in_pieces_timed_at_each_word(engine, streamed):
    # The transcript LiveKit shows in step with the audio: the text exactly
    # as pushed, cut where each word ends, each piece timed at its word's
    # start as the engine reports it, and attached to the audio it starts in.
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)

    async def main():
        if not streamed:
            async with tts.synthesize(TEXT) as request:
                return await timed_transcript(request)
        async with tts.stream() as stream:
            for piece in pieces(TEXT, 7):
                stream.push_text(piece)
                await asyncio.sleep(0)
            stream.end_input()
            return await timed_transcript(stream)

    got = asyncio.run(main())
    assert "".join(piece for piece, _ in got) == TEXT
    # A word's piece ends with it (the spaces and punctuation before it go
    # with it); what follows the last word is one piece more.
    if not any(c.isalnum() for c in got[-1][0]):
        got.pop()
    assert [piece.split()[-1].strip(".,") for piece, _ in got] == [
        w.strip(".,") for w in TEXT.split()
    ]
    with engine.stream(voice=VOICE, sample_rate=RATE) as s:
        s.report_words()
        s.push_text(TEXT)
        s.end_input()
        for _ in s:
            pass
        words = [m for m in s.marks() if m.kind == "word"]
    assert [piece.start_time for piece, _ in got] == pytest.approx([m.seconds for m in words])
    for piece, audio_before in got:
        # On the frame the word is heard in: sent right after the engine
        # block (10 ms) it starts in, so the frame it rides on starts at most
        # that block's end after the word (a quarter block more for the float
        # sums of frame lengths); not a word later, nor long before.
        assert audio_before <= piece.start_time + 0.0125, (piece, audio_before)
        assert piece.start_time <= audio_before + 0.5


def test_update_options_applies_to_the_next_request_and_bad_ones_change_nothing(engine):
    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)
    tts.update_options(voice="awb", length_scale=1.2)
    assert tts.model == "awb"
    text = "Another voice, more slowly."

    async def main():
        async with tts.synthesize(text) as request:
            return await collect(request, RATE)

    expected = reference_pcm(engine, text, voice="awb", length_scale=1.2)
    assert_same_audio(asyncio.run(main()), expected)
    with pytest.raises(libetude.InvalidArgument, match="seed applies to Piper voices"):
        tts.update_options(seed=7)
    with pytest.raises(libetude.EtudeError):
        tts.update_options(voice="no-such-voice")
    assert tts.model == "awb"  # unchanged by the refusals
    tts.update_options(length_scale=None)
    assert_same_audio(asyncio.run(main()), reference_pcm(engine, text, voice="awb"))


def test_an_engine_the_tts_made_is_closed_by_aclose_and_a_given_one_is_not(engine):
    own = EtudeTTS(voice=VOICE, sample_rate=RATE)
    shared = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE)
    asyncio.run(own.aclose())
    asyncio.run(shared.aclose())
    assert own.engine.closed
    assert not engine.closed


def test_update_options_refuses_the_rate_and_keeps_what_is_not_given(engine):
    from livekit.agents.types import NOT_GIVEN

    tts = EtudeTTS(engine=engine, voice=VOICE, sample_rate=RATE, length_scale=1.2)
    with pytest.raises(libetude.InvalidArgument, match="sample_rate is fixed"):
        tts.update_options(sample_rate=22050)
    tts.update_options(voice=NOT_GIVEN, length_scale=NOT_GIVEN)
    assert tts.model == VOICE
    text = "Still slow."

    async def main():
        async with tts.synthesize(text) as request:
            return await collect(request, RATE)

    assert_same_audio(asyncio.run(main()), reference_pcm(engine, text, length_scale=1.2))
