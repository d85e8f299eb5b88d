"""What the Wyoming client tests share (wyoming_client_test.py, wyoming_piper_cases.py): the
real `wyoming` package's events (exit 77, a skip, without it), the etude program under test
(argv[1]), a server of its own per test with its log, the offline render (`etude say --raw`),
and reading an utterance's events back."""
import asyncio
import os
import re
import subprocess
import sys
import time


try:
    from wyoming.audio import AudioChunk, AudioStart, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import (Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop,
                             SynthesizeStopped, SynthesizeVoice)
except ImportError as e:
    print(f"SKIP: the `wyoming` package is not installed ({e}); run scripts/bootstrap.sh test")
    sys.exit(77)

ETUDE = sys.argv[1]
TIMEOUT = 60.0

REPLY = ("The kitchen lights are on. The bedroom is dark! Would you like me to turn on the porch "
         "light? It is twenty one degrees outside, and the forecast says rain tonight.")
TEXTS = [
    "Hello there.",
    "The living room lights are now off.",
    "It is seven thirty in the morning. Breakfast is ready!",
    "Your timer for ten minutes has started.",
    "The front door is locked, and the garage door is closed.",
    "I could not find a device called the attic fan.",
    "Tomorrow will be sunny, with a high of twenty four degrees.",
    "Playing your morning playlist. Enjoy!",
]

_renders = {}


def offline(text, voice):
    """The offline render: etude say --raw (16-bit little-endian, the voice's 16 kHz)."""
    key = (text, voice)
    if key not in _renders:
        _renders[key] = subprocess.run([ETUDE, "say", "--voice", voice, "--raw", text],
                                       check=True, capture_output=True).stdout
    return _renders[key]


class Server:
    def __init__(self, *extra):
        # One malloc arena: glibc otherwise keeps a heap per thread that has run, and after
        # dozens of connection threads RSS measures those caches (tens of MB that come and go,
        # bounded by 8 per core) instead of what the server holds. With one arena RSS tracks
        # live memory, so "memory stays bounded" below is a real check.
        env = dict(os.environ, MALLOC_ARENA_MAX="1")
        self.proc = subprocess.Popen([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0", *extra],
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.extra = extra
        line = self.proc.stderr.readline()
        m = re.search(r"tcp://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError(f"server did not say where it listens: {line!r}")
        self.port = int(m.group(1))
        self.log = []
        import threading
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line.rstrip("\n"))

    def threads(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"Threads:\s+(\d+)", f.read()).group(1))

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        assert rc == 0, f"server exited with {rc}"


async def read_utterance(client, streaming):
    """Events until audio-stop (one-shot) or synthesize-stopped (stream): (start, pcm, types)."""
    start, pcm, types = None, bytearray(), []
    while True:
        ev = await asyncio.wait_for(client.read_event(), TIMEOUT)
        assert ev is not None, f"connection closed after {types}"
        types.append(ev.type)
        if Error.is_type(ev.type):
            raise AssertionError(f"error event: {ev.data}")
        if AudioStart.is_type(ev.type):
            assert start is None, "two audio-start events in one utterance"
            start = AudioStart.from_event(ev)
        elif AudioChunk.is_type(ev.type):
            chunk = AudioChunk.from_event(ev)
            assert start is not None and (chunk.rate, chunk.width, chunk.channels) == (
                start.rate, start.width, start.channels), "one audio format per utterance"
            pcm += chunk.audio
        elif AudioStop.is_type(ev.type) and not streaming:
            return start, bytes(pcm), types
        elif SynthesizeStopped.is_type(ev.type):
            assert streaming
            return start, bytes(pcm), types


def check_equal(pcm, text, voice, what):
    ref = offline(text, voice)
    if pcm != ref:
        n = min(len(pcm), len(ref))
        first = next((i for i in range(n) if pcm[i] != ref[i]), n)
        raise AssertionError(f"{what}: {len(pcm)} bytes received, offline render {len(ref)}; "
                             f"first difference at byte {first}")


async def synthesize(port, text, voice, speaker=None):
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Synthesize(text=text, voice=SynthesizeVoice(
            name=voice, speaker=speaker)).event())
        start, pcm, _ = await read_utterance(c, streaming=False)
        assert (start.rate, start.width, start.channels) == (16000, 2, 1), start
        return pcm


async def stream(port, text, voice, pieces):
    """Home Assistant's streaming flow: start, chunks cut mid-word, the whole text again as a
    compatibility synthesize, stop."""
    cuts = [round(i * len(text) / pieces) for i in range(pieces + 1)]
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
        for a, b in zip(cuts, cuts[1:]):
            await c.write_event(SynthesizeChunk(text=text[a:b]).event())
        await c.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        await c.write_event(SynthesizeStop().event())
        start, pcm, types = await read_utterance(c, streaming=True)
        assert types[0] == "audio-start" and types[-2:] == ["audio-stop", "synthesize-stopped"], types
        return pcm


async def expect_error(client, code):
    while True:
        ev = await asyncio.wait_for(client.read_event(), TIMEOUT)
        assert ev is not None, f"closed before an error {code}"
        if Error.is_type(ev.type):
            assert ev.data.get("code") == code, ev.data
            return


async def expect_end(client, after):
    """A request the server could not speak ends the connection, as wyoming-piper's does
    (Home Assistant reads a plain synthesize's reply until audio-stop or the end, so an
    error alone would keep it waiting for --idle-timeout): the end comes at once."""
    t0 = time.monotonic()
    ev = await asyncio.wait_for(client.read_event(), 5)
    assert ev is None, f"after {after}: {ev.type if ev else ev} instead of the connection's end"
    assert time.monotonic() - t0 < 2, f"after {after}: the end took {time.monotonic() - t0:.1f} s"
