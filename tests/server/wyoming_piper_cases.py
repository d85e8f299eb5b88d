"""The Wyoming client tests' cases on a Piper voice (the stored multi-speaker test voice):
served by name and speaker, and wyoming-piper's voice options, each request equal to
`etude say` with the same voice and options. Run by wyoming_client_test.py."""
import asyncio
import os
import subprocess
import time

from wyoming_harness import (ETUDE, REPLY, TIMEOUT, AsyncTcpClient, Server, Synthesize,
                             SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice,
                             check_equal, expect_end, expect_error, read_utterance)
from wyoming.event import Event
from wyoming.info import Describe, Info

PIPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "piper",
                     "test_medium_multi.onnx")


def offline_piper(text, speaker):
    """A Piper voice's offline render: etude say --raw at the voice's 22050 Hz (seed 0, as the
    server's streams)."""
    return subprocess.run([ETUDE, "say", "--voice", PIPER, "--speaker", speaker, "--raw", text],
                          check=True, capture_output=True).stdout


async def case_piper(_srv):
    """A Piper voice served with --voice: listed first with its speakers, spoken by name and
    speaker (one-shot and streamed), equal to its offline render; an unknown speaker is an
    error event."""
    probe = subprocess.run([ETUDE, "phonemize", "--voice", PIPER, "hi"], capture_output=True)
    if probe.returncode != 0:
        print("  SKIP piper: this build cannot phonemize text (no espeak-ng)")
        return
    server = Server("--voice", PIPER)
    try:
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Describe().event())
            info = Info.from_event(await asyncio.wait_for(c.read_event(), TIMEOUT))
            first = info.tts[0].voices[0]
            assert first.name == "test_medium_multi", first
            assert first.languages == ["en_US"], first
            assert [s.name for s in first.speakers] == [f"speaker_{i}" for i in range(4)], first
        voice = SynthesizeVoice(name="test_medium_multi", speaker="speaker_2")
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Synthesize(text=REPLY, voice=voice).event())
            start, pcm, _ = await read_utterance(c, streaming=False)
        assert (start.rate, start.width, start.channels) == (22050, 2, 1), start
        ref = offline_piper(REPLY, "speaker_2")
        assert pcm == ref, f"synthesize: {len(pcm)} bytes, offline render {len(ref)}"
        # The speaker by its id as a JSON number (wyoming-piper takes int() of it).
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Event(type="synthesize", data={
                "text": REPLY, "voice": {"name": "test_medium_multi", "speaker": 2}}))
            _, pcm, _ = await read_utterance(c, streaming=False)
        assert pcm == ref, f"speaker 2 as a number: {len(pcm)} bytes, offline render {len(ref)}"
        cuts = [round(i * len(REPLY) / 40) for i in range(41)]
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(SynthesizeStart(voice=voice).event())
            for a, b in zip(cuts, cuts[1:]):
                await c.write_event(SynthesizeChunk(text=REPLY[a:b]).event())
            await c.write_event(Synthesize(text=REPLY, voice=voice).event())
            await c.write_event(SynthesizeStop().event())
            _, pcm, _ = await read_utterance(c, streaming=True)
        assert pcm == ref, f"stream of 40 pieces: {len(pcm)} bytes, offline render {len(ref)}"
        # A speaker the voice does not have, by name or id, and a language no voice speaks:
        # spoken by the default speaker and voice with a line in the log, as wyoming-piper
        # warns and speaks (it ignores the language).
        fallback = offline_piper("Hi.", "speaker_0")
        for what, voice_data, note in [
                ("speaker 'nobody'", {"name": "test_medium_multi", "speaker": "nobody"},
                 "has no speaker 'nobody'"),
                ("speaker 9", {"name": "test_medium_multi", "speaker": 9}, "has no speaker '9'"),
                ("language fr_FR", {"language": "fr_FR"}, "no voice speaks 'fr_FR'")]:
            async with AsyncTcpClient("127.0.0.1", server.port) as c:
                await c.write_event(Event(type="synthesize", data={"text": "Hi.",
                                                                    "voice": voice_data}))
                _, pcm, _ = await read_utterance(c, streaming=False)
            assert pcm == fallback, f"{what}: {len(pcm)} bytes, speaker_0's {len(fallback)}"
            deadline = time.monotonic() + 10
            while not any(note in line for line in server.log):
                assert time.monotonic() < deadline, f"{what}: no line in the log: {server.log}"
                await asyncio.sleep(0.05)
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event())
            await expect_error(c, "unknown-voice")
            await expect_end(c, "unknown-voice on synthesize-start")
    finally:
        server.stop()


def say_piper(text, *options):
    return subprocess.run([ETUDE, "say", "--voice", PIPER, *options, "--raw", text],
                          check=True, capture_output=True).stdout


async def case_piper_tuning(_srv):
    """wyoming-piper's voice options: --speaker (the default voice's), --noise-scale,
    --length-scale, --noise-w-scale and --sentence-silence (between a request's sentences), and
    its --auto-punctuation (on by default: text without a final mark ends with ".") and
    --data-dir (a voice folder --voice names voices in); each
    request equals `etude say` with the same options, one-shot and streamed. Bad values stop
    the server at start with the reason."""
    probe = subprocess.run([ETUDE, "phonemize", "--voice", PIPER, "hi"], capture_output=True)
    if probe.returncode != 0:
        print("  SKIP piper_tuning: this build cannot phonemize text (no espeak-ng)")
        return
    tuning = ["--speaker", "speaker_1", "--noise-scale", "0.3", "--length-scale", "1.2",
              "--noise-w-scale", "0.5"]
    text = "This is sentence one. This is sentence two"
    plain = say_piper(text + ".", *tuning)
    ref = say_piper(text + ".", *tuning, "--sentence-silence", "0.5")
    # One boundary between two sentences: exactly 0.5 s of 22050 Hz 16-bit samples more.
    assert len(ref) - len(plain) == 11025 * 2, (len(ref), len(plain))
    server = Server("--voice", PIPER, *tuning, "--sentence-silence", "0.5")
    try:
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Synthesize(text=text).event())
            _, pcm, _ = await read_utterance(c, streaming=False)
        assert pcm == ref, f"synthesize: {len(pcm)} bytes, `etude say` {len(ref)}"
        cuts = [round(i * len(text) / 17) for i in range(18)]
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(SynthesizeStart().event())
            for a, b in zip(cuts, cuts[1:]):
                await c.write_event(SynthesizeChunk(text=text[a:b]).event())
            await c.write_event(SynthesizeStop().event())
            _, pcm, _ = await read_utterance(c, streaming=True)
        assert pcm == ref, f"stream of 17 pieces: {len(pcm)} bytes, `etude say` {len(ref)}"
        # Text that ends in a blank line gets its mark before it (after it the mark would be
        # a sentence of its own, which says nothing), one-shot and streamed.
        for pieces in (1, 9):
            blank = text + "\n\n"
            cuts = [round(i * len(blank) / pieces) for i in range(pieces + 1)]
            async with AsyncTcpClient("127.0.0.1", server.port) as c:
                if pieces == 1:
                    await c.write_event(Synthesize(text=blank).event())
                else:
                    await c.write_event(SynthesizeStart().event())
                    for a, b in zip(cuts, cuts[1:]):
                        await c.write_event(SynthesizeChunk(text=blank[a:b]).event())
                    await c.write_event(SynthesizeStop().event())
                _, pcm, _ = await read_utterance(c, streaming=pieces > 1)
            assert pcm == ref, f"a blank line at the end, {pieces} piece(s): {len(pcm)} bytes"
        # A request's own speaker comes before --speaker.
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Synthesize(text=text + "!", voice=SynthesizeVoice(
                name="test_medium_multi", speaker="speaker_3")).event())
            _, pcm, _ = await read_utterance(c, streaming=False)
        other = say_piper(text + "!", *tuning[2:], "--speaker", "speaker_3",
                          "--sentence-silence", "0.5")
        assert pcm == other, f"speaker_3: {len(pcm)} bytes, `etude say` {len(other)}"
    finally:
        server.stop()
    # wyoming-piper's --data-dir: a voice folder, whose voices --voice names.
    folder = os.path.dirname(PIPER)
    server = Server("--data-dir", "/nonexistent/voices", "--data-dir", folder, "--voice",
                    "test_medium_multi", "--auto-punctuation", "")
    try:
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Describe().event())
            info = Info.from_event(await asyncio.wait_for(c.read_event(), TIMEOUT))
            assert info.tts[0].voices[0].name == "test_medium_multi", info.tts[0].voices[0]
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Synthesize(text=text).event())
            _, pcm, _ = await read_utterance(c, streaming=False)
        bare = offline_piper(text, "speaker_0")
        assert pcm == bare, f"--auto-punctuation '': {len(pcm)} bytes, `etude say` {len(bare)}"
        assert bare != offline_piper(text + ".", "speaker_0"), "the mark changes nothing"
        # A --data-dir that does not exist is passed over with a note, as wyoming-piper's.
        deadline = time.monotonic() + 10
        while not any("no such folder" in line for line in server.log):
            assert time.monotonic() < deadline, f"no note of the missing folder: {server.log}"
            await asyncio.sleep(0.1)
    finally:
        server.stop()
    # Home Assistant's Piper add-on passes --speaker 0 whatever the voice: a voice of one
    # speaker speaks as itself.
    server = Server("--speaker", "0")
    try:
        async with AsyncTcpClient("127.0.0.1", server.port) as c:
            await c.write_event(Synthesize(text="Hello there.").event())
            _, pcm, _ = await read_utterance(c, streaming=False)
        check_equal(pcm, "Hello there.", "slt", "--speaker 0 with slt")
    finally:
        server.stop()
    for bad, why in [(["--voice", PIPER, "--speaker", "nobody"], "no speaker 'nobody'"),
                     (["--voice", PIPER, "--length-scale", "0"], "above 0"),
                     (["--voice", PIPER, "--noise-scale", "-1"], "0 or more"),
                     (["--voice", PIPER, "--sentence-silence", "61"], "0 to 60"),
                     (["--auto-punctuation", "\udcff"], "not valid UTF-8")]:
        r = subprocess.run([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0", *bad],
                           capture_output=True, timeout=60,
                           env=dict(os.environ, PYTHONIOENCODING="utf-8"))
        err = r.stderr.decode(errors="replace")
        assert r.returncode == 2 and why in err, f"{bad}: exit {r.returncode}, {err!r}"
