"""What wyoming-piper (2.5.2) does that a client may count on, checked on our server: the
cases of wyoming_client_test.py that follow it rather than the protocol's text. Each names the
wyoming-piper code it follows."""
import asyncio
import time

from wyoming_harness import (TEXTS, TIMEOUT, AsyncTcpClient, AudioChunk, Server, Synthesize,
                             SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped,
                             SynthesizeVoice, check_equal, read_utterance, synthesize)
from wyoming.info import Describe, Info  # noqa: E402


async def events_until(client, last_type):
    """The events' types, and the audio-chunks' payloads, up to `last_type`."""
    types, chunks = [], []
    while True:
        ev = await asyncio.wait_for(client.read_event(), TIMEOUT)
        assert ev is not None, f"connection closed after {types}"
        types.append(ev.type)
        if AudioChunk.is_type(ev.type):
            chunks.append(AudioChunk.from_event(ev).audio)
        if ev.type == last_type:
            return types, chunks


async def case_markdown(srv):
    """Markdown's asterisks are not read out (sentence_stream's remove_asterisks, which
    wyoming-piper's sentence splitter applies to every sentence): a language model's
    "**bold**" and "* bullets" are spoken as their words, whole or streamed."""
    text = "Hello there."
    check_equal(await synthesize(srv.port, "**Hello** there.", "slt"), text, "slt", "**bold**")
    check_equal(await synthesize(srv.port, "* Hello there.", "slt"), text, "slt", "a bullet")
    async with AsyncTcpClient("127.0.0.1", srv.port) as c:
        await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="slt")).event())
        for piece in ["**Hel", "lo*", "* the", "re."]:
            await c.write_event(SynthesizeChunk(text=piece).event())
        await c.write_event(SynthesizeStop().event())
        _, pcm, _ = await read_utterance(c, streaming=True)
    check_equal(pcm, text, "slt", "**bold** streamed across chunks")


async def case_order_and_chunks(srv):
    """describe and ping sent behind a synthesize are answered after its audio, in the order
    they came, as wyoming-piper takes one event after another; audio-chunks hold 1024 samples
    each (its --samples-per-chunk), the last one fewer."""
    async with AsyncTcpClient("127.0.0.1", srv.port) as c:
        await c.write_event(Synthesize(text=TEXTS[2], voice=SynthesizeVoice(name="slt")).event())
        await c.write_event(Describe().event())
        types, chunks = await events_until(c, "info")
        assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "info"], types
        sizes = [len(p) for p in chunks]
        assert all(s == 2048 for s in sizes[:-1]) and 0 < sizes[-1] <= 2048, sizes
        check_equal(b"".join(chunks), TEXTS[2], "slt", "in chunks of 1024 samples")


async def case_no_text(srv):
    """A request with no words gets no audio-start: a synthesize only its audio-stop, a stream
    only its synthesize-stopped (wyoming-piper's handler, for a text with no sentence)."""
    async with AsyncTcpClient("127.0.0.1", srv.port) as c:
        await c.write_event(Synthesize(text="  \n ").event())
        types, _ = await events_until(c, "audio-stop")
        assert types == ["audio-stop"], types
        await c.write_event(SynthesizeStart().event())
        await c.write_event(SynthesizeStop().event())
        types, _ = await events_until(c, "synthesize-stopped")
        assert types == ["synthesize-stopped"], types


async def case_like_wyoming_piper_options(srv):
    """wyoming-piper's command line: --uri for where to listen, --samples-per-chunk,
    --no-streaming (describe says so; a stream's events are ignored), --download-dir searched
    for voices; and an open stream that waits for its text past --idle-timeout is not cut off
    (wyoming-piper has no such timeout; a language model may pause mid-reply)."""
    import subprocess
    from wyoming_harness import ETUDE
    proc = subprocess.Popen([ETUDE, "serve", "--uri", "tcp://127.0.0.1:0", "--max-syntheses", "2",
                             "--samples-per-chunk", "500", "--no-streaming", "--download-dir",
                             "/nonexistent-etude-voices", "--update-voices"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        port = int(line.split("tcp://127.0.0.1:")[1].split()[0])
        async with AsyncTcpClient("127.0.0.1", port) as c:
            await c.write_event(Describe().event())
            info = Info.from_event(await asyncio.wait_for(c.read_event(), TIMEOUT))
            assert not info.tts[0].supports_synthesize_streaming, info
            # Ignored, as wyoming-piper --no-streaming ignores them: only the synthesize speaks.
            await c.write_event(SynthesizeStart().event())
            await c.write_event(SynthesizeChunk(text="Not this. ").event())
            await c.write_event(Synthesize(text=TEXTS[0]).event())
            await c.write_event(SynthesizeStop().event())
            types, chunks = await events_until(c, "audio-stop")
            sizes = [len(p) for p in chunks]
            assert all(s == 1000 for s in sizes[:-1]) and 0 < sizes[-1] <= 1000, sizes
            check_equal(b"".join(chunks), TEXTS[0], "slt", "--no-streaming")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read()
    assert "--download-dir /nonexistent-etude-voices: no such folder" in rest, rest
    assert "--update-voices" in rest, rest

    quick = Server("--idle-timeout", "1", "--max-syntheses", "2")
    try:
        async with AsyncTcpClient("127.0.0.1", quick.port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="slt")).event())
            await c.write_event(SynthesizeChunk(text="Hello ").event())
            await asyncio.sleep(2.5)  # a language model's pause, past --idle-timeout
            await c.write_event(SynthesizeChunk(text="there.").event())
            await c.write_event(SynthesizeStop().event())
            _, pcm, _ = await read_utterance(c, streaming=True)
            check_equal(pcm, "Hello there.", "slt", "a stream that paused past --idle-timeout")
            # Between requests the timeout holds.
            t0 = time.monotonic()
            ev = await asyncio.wait_for(c.read_event(), TIMEOUT)
            assert ev is not None and ev.data.get("code") == "idle", ev
            assert time.monotonic() - t0 < 5
    finally:
        quick.stop()
