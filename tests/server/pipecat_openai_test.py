#!/usr/bin/env python3
"""pipecat's OpenAI TTS service (pipecat-ai from PyPI) pointed at `etude serve --http`.

pipecat asks for `pcm` and plays it as 24 kHz 16-bit mono without asking, and accepts only
OpenAI's own voice names (alloy, echo, ...), which the server gives its default voice. A
sentence spoken through a real pipecat pipeline (the service, then a sink that collects its
audio frames) must come back at 24 kHz and equal, sample for sample, the offline render
`etude say --rate 24000 --raw` of the default voice.

Usage: pipecat_openai_test.py ETUDE. Exit 77 (skip) without pipecat-ai or numpy.
"""
import asyncio
import re
import subprocess
import sys
import threading

try:
    import numpy as np
    from pipecat.frames.frames import EndFrame, ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.frame_processor import FrameProcessor
    from pipecat.services.openai.tts import OpenAITTSService
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (tests/python-requirements.txt)")
    sys.exit(77)

ETUDE = sys.argv[1]
TEXT = "Your timer for ten minutes has started."
from pass_fail import check, failures  # noqa: E402  (PASS/FAIL lines)


class Collect(FrameProcessor):
    """The pipeline's end: keeps the audio frames and the errors that reach it."""

    def __init__(self):
        super().__init__()
        self.audio = bytearray()
        self.rates = set()
        self.errors = []

    async def process_frame(self, frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio += frame.audio
            self.rates.add(frame.sample_rate)
        elif isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        await self.push_frame(frame, direction)


async def speak(base_url, voice):
    tts = OpenAITTSService(api_key="not-needed", base_url=base_url,
                           settings=OpenAITTSService.Settings(voice=voice))
    sink = Collect()
    task = PipelineTask(Pipeline([tts, sink]), params=PipelineParams(audio_out_sample_rate=24000))
    await task.queue_frames([TTSSpeakFrame(TEXT), EndFrame()])
    await asyncio.wait_for(PipelineRunner(handle_sigint=False).run(task), timeout=60)
    return sink


def main():
    proc = subprocess.Popen([ETUDE, "serve", "--http", "127.0.0.1:0"], stderr=subprocess.PIPE,
                            text=True)
    try:
        m = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stderr.readline())
        assert m, "the server printed no address"
        log = []
        threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
        want = np.frombuffer(subprocess.run([ETUDE, "say", "--rate", "24000", "--raw", TEXT],
                                            check=True, capture_output=True).stdout, dtype="<i2")
        for voice in ["alloy", "nova"]:
            sink = asyncio.run(speak(f"http://127.0.0.1:{m.group(1)}/v1", voice))
            got = np.frombuffer(bytes(sink.audio), dtype="<i2")
            check(f"{voice}: no error frames", not sink.errors, sink.errors)
            check(f"{voice}: audio frames at 24 kHz", sink.rates == {24000}, sink.rates)
            check(f"{voice}: equal to `etude say --rate 24000 --raw`",
                  len(got) == len(want) and np.array_equal(got, want), (len(got), len(want)))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
