#!/usr/bin/env python3
"""etude serve --wyoming against the real `wyoming` client from PyPI (the library Home
Assistant's integration and wyoming-piper use).

Every utterance received over Wyoming must equal, byte for byte, the offline render of the same
text and voice (`etude say --raw`): the server converts the engine's float samples with the same
function, and the engine's output does not depend on how it is read. Spoken once: equal length.

Usage: wyoming_client_test.py ETUDE [CASE...]   (cases: see CASES; default all). What the
cases share is in wyoming_harness.py, the Piper voice's cases in wyoming_piper_cases.py.
Exit 77 (skip) when the `wyoming` package is not importable.
"""
import asyncio
import os
import random
import re
import subprocess
import sys
import time

# First: it exits 77 (a skip) where the `wyoming` package is missing.
from wyoming_harness import (ETUDE, REPLY, TEXTS, TIMEOUT, AsyncTcpClient, AudioChunk, Error,
                             Server, Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop,
                             SynthesizeStopped, SynthesizeVoice, check_equal, expect_end,
                             expect_error, offline, read_utterance, stream, synthesize)
from wyoming.event import async_read_event  # noqa: E402
from wyoming.info import Describe, Info  # noqa: E402
from wyoming.ping import Ping, Pong  # noqa: E402
from wyoming_peer_cases import (case_like_wyoming_piper_options, case_markdown, case_no_text,
                                case_order_and_chunks)
from wyoming_piper_cases import case_piper, case_piper_tuning


# ---- cases ----------------------------------------------------------------------------------

async def case_describe(srv):
    async with AsyncTcpClient("127.0.0.1", srv.port) as c:
        await c.write_event(Describe().event())
        ev = await asyncio.wait_for(c.read_event(), TIMEOUT)
        info = Info.from_event(ev)
        assert len(info.tts) == 1, info
        tts = info.tts[0]
        assert tts.supports_synthesize_streaming and tts.installed
        names = [v.name for v in tts.voices]
        assert names[:3] == ["slt", "rms", "awb"], names
        for v in tts.voices:
            assert v.installed and v.languages and v.attribution.name and v.description, v
        await c.write_event(Ping(text="hi").event())
        pong = await asyncio.wait_for(c.read_event(), TIMEOUT)
        assert Pong.is_type(pong.type) and Pong.from_event(pong).text == "hi", pong


async def case_synthesize(srv):
    for voice, text in [("slt", REPLY), ("rms", TEXTS[2]), ("awb", TEXTS[4])]:
        check_equal(await synthesize(srv.port, text, voice), text, voice, f"synthesize {voice}")
    # A speaker named for a voice of one speaker is not an error: the voice
    # speaks as itself, as wyoming-piper does when a voice has no such
    # speaker (Home Assistant may send the one it last used with another).
    check_equal(await synthesize(srv.port, TEXTS[2], "rms", speaker="speaker_2"), TEXTS[2], "rms",
                "synthesize rms with a speaker it does not have")
    # Requests on one connection are taken one after another, as the Python servers take
    # them: two sent at once are both spoken, in order, and a third sent the moment the
    # second's audio-stop is read (before the server may have put that synthesis away).
    async with AsyncTcpClient("127.0.0.1", srv.port) as c:
        await c.write_event(Synthesize(text=TEXTS[0], voice=SynthesizeVoice(name="slt")).event())
        await c.write_event(Synthesize(text=TEXTS[1], voice=SynthesizeVoice(name="rms")).event())
        _, first, _ = await read_utterance(c, streaming=False)
        _, second, _ = await read_utterance(c, streaming=False)
        await c.write_event(Synthesize(text=TEXTS[2], voice=SynthesizeVoice(name="awb")).event())
        _, third, _ = await read_utterance(c, streaming=False)
    check_equal(first, TEXTS[0], "slt", "the first of two requests sent at once")
    check_equal(second, TEXTS[1], "rms", "the second of two requests sent at once")
    check_equal(third, TEXTS[2], "awb", "a request sent as the last audio-stop was read")


async def case_streaming(srv):
    pcm = await stream(srv.port, REPLY, "slt", 40)
    check_equal(pcm, REPLY, "slt", "stream of 40 pieces plus the compatibility synthesize")
    # Pieces cut at random places, even inside a sentence's last word.
    rng = random.Random(15)
    for voice in ["rms", "awb"]:
        text = " ".join(rng.sample(TEXTS, 3))
        check_equal(await stream(srv.port, text, voice, rng.randint(5, 60)), text, voice,
                    f"stream {voice}")


async def case_concurrent(srv):
    jobs = []
    for i in range(16):
        text, voice = TEXTS[i % len(TEXTS)], ["slt", "rms", "awb"][i % 3]
        offline(text, voice)  # rendered before the clients start
        jobs.append((text, voice, i % 2 == 1))
    t0 = time.monotonic()
    results = await asyncio.gather(*[
        stream(srv.port, t, v, 17) if streamed else synthesize(srv.port, t, v)
        for t, v, streamed in jobs])
    wall = time.monotonic() - t0
    for (text, voice, streamed), pcm in zip(jobs, results):
        check_equal(pcm, text, voice, f"16 clients at once: {voice} {'stream' if streamed else ''}")
    audio = sum(len(p) for p in results) / 2 / 16000
    print(f"  16 clients: {audio:.1f} s of audio in {wall:.2f} s")


async def settle(srv, baseline, what, seconds=20.0):
    """Waits until the server is back to `baseline` threads: nothing left running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if srv.threads() <= baseline:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: {srv.threads()} threads still running, {baseline} before")


async def case_dropped(_shared):
    """64 connections dropped at random mid-stream, five times over: every time the server ends
    all their work (threads back to the baseline) and goes on serving; once the first rounds
    have set the high-water mark, further rounds leave memory where it was.

    Its own server admits a fixed 8 at once. With the measured default (up to 64 for slt) how
    many of the 64 run together depends on timing, and so does the heap's high-water mark: in
    CI round 3 peaked 100 MB above round 1. Ten rounds of 64 at once level off at 197 MB (about
    2 MB a stream at the peak), so nothing leaked; round 1 had not reached the peak.
    A fixed peak makes RSS after a round measure what was kept, which is what this case asks."""
    srv = Server("--max-syntheses", "8")
    try:
        await dropped_rounds(srv)
    finally:
        srv.stop()


async def dropped_rounds(srv):
    await synthesize(srv.port, TEXTS[0], "slt")  # every lazily started worker is up
    baseline = srv.threads()
    rng = random.Random(64)

    async def drop(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        text = " ".join(TEXTS) * 2
        from wyoming.event import async_write_event
        if i % 2:
            await async_write_event(Synthesize(text=text).event(), writer)
        else:
            await async_write_event(SynthesizeStart().event(), writer)
            await async_write_event(SynthesizeChunk(text=text[: rng.randint(1, len(text))]).event(),
                                    writer)
        for _ in range(rng.randint(0, 8)):
            try:  # a stream's text may hold no complete sentence: then no audio comes
                if await asyncio.wait_for(async_read_event(reader), 1.0) is None:
                    break
            except asyncio.TimeoutError:
                break
        writer.transport.abort()  # vanish mid-stream, without a goodbye

    rss = []
    for round_ in range(5):
        await asyncio.gather(*[drop(i) for i in range(64)])
        await settle(srv, baseline, f"64 dropped connections, round {round_ + 1}")
        check_equal(await synthesize(srv.port, TEXTS[1], "slt"), TEXTS[1], "slt", "after drops")
        rss.append(srv.rss_kib())
    # glibc's allocator keeps freed large blocks as cache once its mmap threshold has risen:
    # RSS moves in steps of about 16 MB that come and go (46-63 MB after the same first
    # round in six runs; once 52 -> 68 MB within one), so the bound sits above one step.
    # The high-water mark is the highest of the first three rounds, not the first: one
    # round may not reach it (CI, under load: 40 MB after round 1, then 74 and 66 MB,
    # which failed a check against round 1). A leak of 200 KB per dropped connection
    # still fails it: the last two rounds' 128 connections add 25 MB above any mark.
    grown = rss[-1] - max(rss[:3])
    assert grown < 24 * 1024, (
        f"memory grew by {grown} KiB over 128 more dropped connections: {rss}")
    outcomes = {k: sum(l.endswith(" " + k) for l in srv.log) for k in ("cancelled", "busy")}
    # Per round 8 run, 32 wait, the rest are told "busy" at once.
    print(f"  5 x 64 drops: syntheses logged {outcomes}; threads back to {baseline} each time; "
          f"RSS after each round {rss} KiB")


def malformed_frames():
    """(bytes, closes): one malformed frame each, and whether the server must close after it."""
    j = lambda s: s.encode() + b"\n"
    frames = [
        (b"this is not json\n", True),
        (b"{\"type\": \"synthesize\", \"data\": {\"text\": \"unterminated\n", True),
        (j('["a", "list"]'), True),
        (j('{"data": {}}'), True),
        (j('{"type": "synthesize", "data_length": -5}'), True),
        (j('{"type": "audio-chunk", "payload_length": -1}'), True),
        (j('{"type": "synthesize", "data_length": 99999999999}'), True),
        (j('{"type": "audio-chunk", "payload_length": 1e12}'), True),
        (j('{"type": "synthesize", "data_length": "12"}'), True),
        (j('{"type": "synthesize", "data_length": 20}') + b'{"text": "abc"', None),  # truncated
        (j('{"type": "audio-chunk", "payload_length": 1000}') + b"\x00" * 10, None),  # truncated
        (j('{"type": "synthesize", "data_length": 4}') + b"]]]]", True),
        (b"{" * 5000 + b"\n", True),
        (b"x" * 70000, True),  # a header line past the 64 KiB cap
        (j('{"type": "no-such-event", "data": {"a": 1}}'), False),
        (j('{"type": "synthesize-chunk", "data": {"text": "orphan"}}'), False),
        (j('{"type": "synthesize-stop"}'), False),
        # A request that cannot be spoken: its error, then the connection's end, as
        # wyoming-piper's (expect_end).
        (j('{"type": "synthesize", "data": {"text": 5}}'), True),
        (j('{"type": "synthesize", "data": {"text": "Hi.", "voice": {"name": "nobody"}}}'), True),
        (j('{"type": "synthesize", "data": {"text": "Hi.", "voice": "slt"}}'), True),
    ]
    return frames


async def case_malformed(srv):
    await synthesize(srv.port, TEXTS[0], "slt")
    baseline = srv.threads()
    rss_before = srv.rss_kib()
    frames = malformed_frames()
    sem = asyncio.Semaphore(16)
    errors = {"error-event": 0, "closed": 0, "kept": 0}

    async def one(i):
        data, closes = frames[i % len(frames)]
        async with sem:
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(data)
            await writer.drain()
            if closes is None:  # truncated: the client goes away inside the frame
                writer.close()
                return
            if closes is False:
                # The connection must still work after an unknown or orphan event.
                from wyoming.event import async_write_event
                await async_write_event(Ping(text=str(i)).event(), writer)
            got_error, got_pong = False, False
            while True:
                ev = await asyncio.wait_for(async_read_event(reader), TIMEOUT)
                if ev is None:
                    break
                if Error.is_type(ev.type):
                    got_error = True
                if Pong.is_type(ev.type):
                    assert ev.data.get("text") == str(i)
                    got_pong = True
                    break
            if closes:
                assert got_error, f"no error event before closing on frame {data[:60]!r}"
                errors["closed"] += 1
            else:
                assert got_pong, f"connection did not survive {data[:60]!r}"
                errors["kept"] += 1
            errors["error-event"] += got_error
            writer.close()

    await asyncio.gather(*[one(i) for i in range(1000)])
    await settle(srv, baseline, "1000 malformed frames")
    check_equal(await synthesize(srv.port, TEXTS[3], "slt"), TEXTS[3], "slt", "after malformed")
    grown = srv.rss_kib() - rss_before
    print(f"  1000 malformed frames: {errors}; RSS grew {grown} KiB")
    assert grown < 16 * 1024, f"memory grew by {grown} KiB over 1000 malformed frames"


async def case_unix_and_stdio(srv):
    """The other two transports: a Unix socket, and one client on a child's stdin/stdout."""
    import tempfile
    from wyoming.client import AsyncUnixClient
    path = os.path.join(tempfile.mkdtemp(), "etude.sock")
    proc = subprocess.Popen([ETUDE, "serve", "-q", "--wyoming", f"unix://{path}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert "unix://" in proc.stderr.readline()
        async with AsyncUnixClient(path) as c:
            await c.write_event(Synthesize(text=TEXTS[5]).event())
            _, pcm, _ = await read_utterance(c, streaming=False)
        check_equal(pcm, TEXTS[5], "slt", "unix socket")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    assert not os.path.exists(path), "the socket file is left behind"

    proc = await asyncio.create_subprocess_exec(ETUDE, "serve", "-q", "--wyoming", "stdio://",
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    from wyoming.event import async_write_event
    await async_write_event(SynthesizeStart(voice=SynthesizeVoice(name="awb")).event(), proc.stdin)
    for piece in [TEXTS[6][:9], TEXTS[6][9:30], TEXTS[6][30:]]:
        await async_write_event(SynthesizeChunk(text=piece).event(), proc.stdin)
    await async_write_event(SynthesizeStop().event(), proc.stdin)
    pcm = bytearray()
    while True:
        ev = await asyncio.wait_for(async_read_event(proc.stdout), TIMEOUT)
        assert ev is not None
        if AudioChunk.is_type(ev.type):
            pcm += AudioChunk.from_event(ev).audio
        if SynthesizeStopped.is_type(ev.type):
            break
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0, "stdio server did not end with its client"
    check_equal(bytes(pcm), TEXTS[6], "awb", "stdio")


async def case_capacity(srv):
    """The server measures its capacity at start and admits that many at once (the line
    after the listening one), unless --max-syntheses says a number."""
    for _ in range(50):
        lines = [ln for ln in srv.log if ln.startswith("etude serve: capacity ")]
        if lines:
            break
        await asyncio.sleep(0.1)
    assert lines, f"no capacity line in {srv.log[:5]}"
    m = re.search(r"capacity (\d+) real-time streams with (\S+) \(it speaks ([\d.]+)x real time"
                  r".*: (\d+) syntheses at once", lines[0])
    assert m, lines[0]
    streams, speed, at_once = int(m.group(1)), float(m.group(3)), int(m.group(4))
    assert streams >= 1 and speed > 1, lines[0]
    assert abs(streams - max(1.0, speed * 0.8)) <= 1, lines[0]  # the speed is printed rounded
    assert at_once == min(streams, 64), lines[0]
    # The promise: the last first audio of that many started together.
    promise = [ln for ln in srv.log if ln.startswith("etude serve: first audio within ")]
    assert promise, srv.log[:5]
    m = re.search(r"first audio within (\d+) ms when (\d+) syntheses start together "
                  r"\(median (\d+) ms", promise[0])
    assert m and int(m.group(2)) == at_once, promise[0]
    assert int(m.group(1)) >= int(m.group(3)) > 0, promise[0]
    small = Server("--max-syntheses", "2")
    try:
        for _ in range(50):
            got = [ln for ln in small.log if ln.startswith("etude serve: capacity ")]
            if got:
                break
            await asyncio.sleep(0.1)
        assert got and ": 2 syntheses at once (--max-syntheses)" in got[0], small.log[:3]
    finally:
        small.stop()


async def case_limits(srv):
    """Busy, text-too-long and idle, on a server with small limits."""
    small = Server("--max-syntheses", "1", "--max-waiting", "0", "--max-text", "300",
                   "--idle-timeout", "1")
    try:
        long_text = " ".join(TEXTS) * 3
        async with AsyncTcpClient("127.0.0.1", small.port) as a, \
                AsyncTcpClient("127.0.0.1", small.port) as b:
            await a.write_event(SynthesizeStart().event())  # holds the one slot
            await asyncio.sleep(0.3)
            await b.write_event(Synthesize(text=TEXTS[0]).event())
            await expect_error(b, "busy")
            await expect_end(b, "busy")
            await a.write_event(SynthesizeChunk(text=long_text[:200]).event())
            await a.write_event(SynthesizeChunk(text=long_text[200:400]).event())
            await expect_error(a, "text-too-long")
            # ... and the stream still ends as Home Assistant waits for it to.
            while not SynthesizeStopped.is_type((await asyncio.wait_for(a.read_event(), TIMEOUT)).type):
                pass
        # The stream stopped by the limit gives its slot back as its log line is written.
        deadline = time.monotonic() + 10
        while not any(" stream " in l and l.endswith("cancelled") for l in small.log):
            assert time.monotonic() < deadline, small.log
            await asyncio.sleep(0.05)
        async with AsyncTcpClient("127.0.0.1", small.port) as c:
            await c.write_event(Synthesize(text=long_text).event())
            await expect_error(c, "text-too-long")
            await expect_end(c, "text-too-long")
        async with AsyncTcpClient("127.0.0.1", small.port) as c:
            # The server speaks again once the slot is free.
            await c.write_event(Synthesize(text=TEXTS[0]).event())
            _, pcm, _ = await read_utterance(c, streaming=False)
            check_equal(pcm, TEXTS[0], "slt", "after the limits")
            t0 = time.monotonic()
            await expect_error(c, "idle")
            assert await asyncio.wait_for(c.read_event(), TIMEOUT) is None, "idle connection kept"
            assert 0.8 < time.monotonic() - t0 < 5, time.monotonic() - t0
    finally:
        small.stop()


async def case_slow_client(srv):
    """A client that stops reading stalls only itself: others are served at once, and it is
    dropped after --write-timeout with its speech cancelled."""
    import socket
    from wyoming.event import async_write_event
    server = Server("--write-timeout", "2")
    try:
        await synthesize(server.port, TEXTS[0], "slt")  # warm-up
        baseline = server.threads()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once
        sock.connect(("127.0.0.1", server.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        long_text = " ".join(TEXTS) * 40  # about 15 minutes of speech
        await async_write_event(Synthesize(text=long_text).event(), writer)
        t0 = time.monotonic()
        for i in range(4):  # meanwhile, others get their replies whole and promptly
            text = TEXTS[i + 1]
            start = time.monotonic()
            check_equal(await synthesize(server.port, text, "slt"), text, "slt", "beside a stalled client")
            assert time.monotonic() - start < 5, f"served in {time.monotonic() - start:.1f} s"
        deadline = t0 + 15
        while not any(l.endswith("cancelled") and " synthesize " in l for l in server.log):
            assert time.monotonic() < deadline, "the stalled client was not dropped"
            await asyncio.sleep(0.1)
        dropped_after = time.monotonic() - t0
        await settle(server, baseline, "after dropping the stalled client")
        writer.transport.abort()
        print(f"  stalled client dropped after {dropped_after:.1f} s (write timeout 2 s)")
    finally:
        server.stop()

CASES = {
    "describe": case_describe,
    "synthesize": case_synthesize,
    "streaming": case_streaming,
    "concurrent": case_concurrent,
    "dropped": case_dropped,
    "malformed": case_malformed,
    "unix_and_stdio": case_unix_and_stdio,
    "limits": case_limits,
    "capacity": case_capacity,
    "slow_client": case_slow_client,
    "markdown": case_markdown,
    "order_and_chunks": case_order_and_chunks,
    "no_text": case_no_text,
    "like_wyoming_piper_options": case_like_wyoming_piper_options,
    "piper": case_piper,
    "piper_tuning": case_piper_tuning,
}


def main():
    names = sys.argv[2:] or list(CASES)
    srv = Server()
    failed = []
    try:
        for name in names:
            t0 = time.monotonic()
            try:
                asyncio.run(CASES[name](srv))
                print(f"PASS {name} ({time.monotonic() - t0:.1f} s)")
            except Exception as e:  # noqa: BLE001 - report every case
                failed.append(name)
                print(f"FAIL {name}: {type(e).__name__}: {e}")
            sys.stdout.flush()
    finally:
        srv.stop()
    if failed:
        print("server log (last 20 lines):\n  " + "\n  ".join(srv.log[-20:]))
        sys.exit(1)


if __name__ == "__main__":
    main()
