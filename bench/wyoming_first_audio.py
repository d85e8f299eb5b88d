#!/usr/bin/env python3
"""First audio over Wyoming: how soon a client hears a 20-word reply.

Starts `etude serve --wyoming tcp://127.0.0.1:0` (or talks to --host/--port: any Wyoming TTS
server, e.g. wyoming-piper, for a side-by-side), and with the real `wyoming` client measures, per
request, the time from the request's last byte written to the first audio-chunk read:

  synthesize   the whole reply in one `synthesize` event
  streaming    Home Assistant's flow: synthesize-start, the reply word by word in
               synthesize-chunk events, the compatibility synthesize, synthesize-stop;
               timed from the chunk that completes the first sentence

Prints the first request's time (for the server it starts, its first since it started), then
median, 90th percentile and best of N requests, and the CPU (lscpu).
Usage: wyoming_first_audio.py [--etude build/cli/etude] [--voice slt] [-n 30]
       [--serve-voice PATH.onnx] [--host H --port P] [--against H:P]
(--serve-voice: a Piper voice for etude serve --voice; ask for it with --voice NAME.)
--against H:P measures a second server (e.g. wyoming-piper) in the same run, the two taking
turns request by request, and prints the median of the per-pair ratios: on a VM whose speed
drifts over minutes, two servers measured one after the other can differ by the drift alone.
"""
import argparse
import asyncio
import re
import statistics
import subprocess
import time

from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import (Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop,
                         SynthesizeStopped, SynthesizeVoice)

# 20 words, two sentences: an assistant's typical answer.
REPLY = ("The living room lights are off and the front door is locked. "
         "Tomorrow will be sunny with a light breeze.")
assert len(REPLY.split()) == 20


async def one_shot(host, port, voice):
    async with AsyncTcpClient(host, port) as c:
        await c.write_event(Synthesize(text=REPLY, voice=SynthesizeVoice(name=voice)).event())
        t0 = time.perf_counter()
        first = None
        while True:
            ev = await c.read_event()
            if AudioChunk.is_type(ev.type) and first is None:
                first = time.perf_counter() - t0
            if AudioStop.is_type(ev.type):
                return first


async def streaming(host, port, voice):
    words = REPLY.split(" ")
    async with AsyncTcpClient(host, port) as c:
        await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
        t0 = None
        for i, w in enumerate(words):
            await c.write_event(SynthesizeChunk(text=(" " if i else "") + w).event())
            if w.endswith(".") and t0 is None:
                # The next piece (its leading space) is what proves the sentence complete.
                await c.write_event(SynthesizeChunk(text=" ").event())
                t0 = time.perf_counter()
        await c.write_event(Synthesize(text=REPLY, voice=SynthesizeVoice(name=voice)).event())
        await c.write_event(SynthesizeStop().event())
        first = None
        while True:
            ev = await c.read_event()
            if AudioChunk.is_type(ev.type) and first is None:
                first = time.perf_counter() - t0
            if SynthesizeStopped.is_type(ev.type):
                return first


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"Model name:\s*(.+)", out)
    cpus = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M)
    return f"{m.group(1).strip() if m else '?'}, {cpus.group(1) if cpus else '?'} CPUs"


def summary(name, times, label=""):
    ms = sorted(t * 1000 for t in times)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    print(f"  {name:11s} median {statistics.median(ms):6.1f} ms   p90 {p90:6.1f} ms   "
          f"best {ms[0]:6.1f} ms   ({len(ms)} requests){label}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etude", default="build/cli/etude")
    ap.add_argument("--voice", default="slt")
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--serve-voice", help="a Piper voice etude serve loads (--voice PATH)")
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    ap.add_argument("--against", help="HOST:PORT of a second server, measured in turn with the first")
    ap.add_argument("--settle", type=float, default=0.3,
                    help="seconds of quiet before each request (default 0.3), so that no "
                         "server's threads still spin from the request before")
    args = ap.parse_args()
    proc = None
    host, port = args.host or "127.0.0.1", args.port
    if port is None:
        extra = ["--voice", args.serve_voice] if args.serve_voice else []
        proc = subprocess.Popen([args.etude, "serve", "-q", "--wyoming", "tcp://127.0.0.1:0",
                                 *extra], stderr=subprocess.PIPE, text=True)
        port = int(re.search(r":(\d+) ", proc.stderr.readline()).group(1))
    try:
        print(f"first audio over Wyoming, 20-word reply, voice {args.voice}; CPU: {cpu_model()}")
        servers = [(f"{host}:{port}", host, port)]
        if args.against:
            other_host, other_port = args.against.rsplit(":", 1)
            servers.append((args.against, other_host, int(other_port)))
        # The first request doubles as the warm-up. For the server this script starts it
        # is the first the process serves: what a user hears first after a restart.
        for name, h, p in servers:
            first = asyncio.run(one_shot(h, p, args.voice))
            where = " (just started)" if proc and p == port else ""
            print(f"  first request of the run, synthesize{where}: {1000 * first:.1f} ms  {name}")
        for kind, request in (("synthesize", one_shot), ("streaming", streaming)):
            times = [[] for _ in servers]
            for _ in range(args.n):
                for i, (_, h, p) in enumerate(servers):
                    time.sleep(args.settle)
                    times[i].append(asyncio.run(request(h, p, args.voice)))
            for (name, _, _), t in zip(servers, times):
                summary(kind, t, f"  {name}" if len(servers) > 1 else "")
            if len(servers) > 1:
                ratios = [b / a for a, b in zip(*times)]
                print(f"  {kind:11s} the second server's time over the first's, median of "
                      f"{len(ratios)} pairs: {statistics.median(ratios):.2f}x")
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
