#!/usr/bin/env python3
"""Many Wyoming clients at once: first audio, speed, and underruns of a listener in real time.

Starts `etude serve --wyoming tcp://127.0.0.1:0 --voice VOICE.onnx` (or talks to --host/--port:
any Wyoming TTS server, e.g. wyoming-piper, for a side-by-side), then for each N of --clients
sends N `synthesize` requests of the same 20-word reply at the same moment, each on its own
connection, and measures per client:

  first audio   from its request written to its first audio-chunk read
  underrun      whether a listener that starts playing at its first chunk, after a prebuffer
                (--prebuffer-ms, as PlaybackRing's latency), ever runs out of audio: the chunks'
                arrival times against the playback clock; the total time it would have waited
                is the underrun time

and for the round: the aggregate speed (seconds of audio made per second of wall time, from
the first request to the last audio-stop), and, for a server it started, the most threads the
server's process had while the round ran (/proc/PID/task, looked at every 20 ms). Rounds repeat (--rounds) and pool their clients.
Prints one line per N, and the CPU (lscpu). Every figure belongs to the machine it ran on.
With 1 among the counts (or --work-ms), each larger N also gets the lower bound on its last first audio,
N * W / (1 - N / S) (docs/benchmarks.md), with W one client's median first audio (or
--work-ms) and S that N's speed from this run, and the p95's ratio to it (issue 41 asks for
1.5 at most).

Usage: many_clients.py --serve-voice en_US-joe-medium.onnx [--clients 1,2,4,8,16]
       [--rounds 3] [--etude build/cli/etude] [--serve-args '--max-syntheses 32']
       [--host H --port P --voice NAME]
"""
import argparse
import asyncio
import os
import re
import statistics
import subprocess
import time

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

# The same 20-word, two-sentence reply and machine line as wyoming_first_audio.py (beside
# this script, so importable when it is run).
from wyoming_first_audio import REPLY, cpu_model  # noqa: E402


async def one_client(host, port, voice, start):
    """Waits for `start`, sends one request; returns (first audio s, arrivals, rate, width,
    channels, t0), arrivals being (time, samples) per chunk."""
    async with AsyncTcpClient(host, port) as c:
        await start.wait()
        syn = Synthesize(text=REPLY, voice=SynthesizeVoice(name=voice) if voice else None)
        await c.write_event(syn.event())
        t0 = time.perf_counter()
        arrivals, rate, width, channels = [], 22050, 2, 1
        while True:
            ev = await c.read_event()
            if ev is None:
                raise RuntimeError("the server closed the connection before audio-stop")
            if AudioStart.is_type(ev.type):
                a = AudioStart.from_event(ev)
                rate, width, channels = a.rate, a.width, a.channels
            elif AudioChunk.is_type(ev.type):
                chunk = AudioChunk.from_event(ev)
                arrivals.append((time.perf_counter(), len(chunk.audio) // (width * channels)))
            elif AudioStop.is_type(ev.type):
                first = arrivals[0][0] - t0 if arrivals else float("nan")
                return first, arrivals, rate, t0


def underrun_seconds(arrivals, rate, prebuffer_s):
    """How long a listener starting at the first chunk plus the prebuffer would wait for audio:
    before each chunk arrives, the playback clock must not have passed the audio before it."""
    if not arrivals:
        return 0.0
    play_start = arrivals[0][0] + prebuffer_s
    waited, have = 0.0, 0
    for t, n in arrivals:
        # The listener needs the sample `have` at play_start + waited + have / rate.
        need_at = play_start + waited + have / rate
        if t > need_at:
            waited += t - need_at
        have += n
    return waited


async def round_of(host, port, voice, n):
    start = asyncio.Event()
    tasks = [asyncio.create_task(one_client(host, port, voice, start)) for _ in range(n)]
    await asyncio.sleep(0.2)  # every connection open before the requests go
    wall0 = time.perf_counter()
    start.set()
    results = await asyncio.gather(*tasks)
    wall = max(a[-1][0] for _, a, _, _ in results if a) - wall0
    audio = sum(sum(s for _, s in a) / rate for _, a, rate, _ in results)
    return results, audio / wall


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def lower_bound_ms(n, work_ms, speed):
    """The earliest the last of n streams started together can be heard: each start needs
    work_ms of the machine before its first audio, and keeping the streams already started
    fed takes n/speed of it, so n starts take n * work / (1 - n / speed) at least (inf when
    n streams are more than the machine holds)."""
    return n * work_ms / (1 - n / speed) if n < speed else float("inf")


def threads_of(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


async def most_threads(pid, most, stop):
    """Keeps most[0] at the most threads process `pid` had until `stop` is set."""
    while not stop.is_set():
        most[0] = max(most[0], threads_of(pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.02)
        except asyncio.TimeoutError:
            pass


async def measure(host, port, voice, counts, rounds, prebuffer_s, settle, work_ms=None,
                  pid=None):
    # A warm-up request: the voice's first use pays for loading.
    await round_of(host, port, voice, 1)
    measured_work = work_ms is None  # W: one client's median first audio, unless given
    for n in counts:
        firsts, speeds, underruns, waits = [], [], 0, []
        most = [0]
        for _ in range(rounds):
            await asyncio.sleep(settle)
            stop = asyncio.Event()
            sampler = asyncio.create_task(most_threads(pid, most, stop)) if pid else None
            results, speed = await round_of(host, port, voice, n)
            if sampler:
                stop.set()
                await sampler
            speeds.append(speed)
            for first, arrivals, rate, _ in results:
                firsts.append(first * 1000)
                w = underrun_seconds(arrivals, rate, prebuffer_s)
                waits.append(w * 1000)
                underruns += w > 0
        print(f"  {n:3d} clients  first audio median {statistics.median(firsts):7.1f} ms  "
              f"p95 {pct(firsts, 0.95):7.1f}  max {max(firsts):7.1f}  "
              f"speed {statistics.median(speeds):5.1f}x  "
              f"underrun {underruns}/{len(firsts)} (worst {max(waits):.0f} ms)"
              + (f"  server threads at most {most[0]}" if pid else ""), flush=True)
        if n == 1 and measured_work:
            work_ms = statistics.median(firsts)
        elif n > 1 and work_ms is not None:
            bound = lower_bound_ms(n, work_ms, statistics.median(speeds))
            where = "one client's median" if measured_work else "--work-ms"
            print(f"      lower bound N*W/(1-N/S) {bound:7.1f} ms (W {work_ms:.1f} ms: {where}; "
                  f"S: this speed); p95 / bound {pct(firsts, 0.95) / bound:.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--etude", default="build/cli/etude")
    ap.add_argument("--serve-voice", help="the Piper voice (.onnx) etude serve loads")
    ap.add_argument("--voice", help="the voice name to ask for (default: the server's own)")
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prebuffer-ms", type=float, default=100.0,
                    help="what a listener buffers before it plays (default 100)")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds between rounds")
    ap.add_argument("--serve-args", default="",
                    help="more options for etude serve, e.g. '--max-syntheses 32'")
    ap.add_argument("--work-ms", type=float,
                    help="W for the lower bound: the machine's work before one stream's first "
                         "audio (default: one client's median first audio, which also counts "
                         "waits that use no CPU, so it overstates W and loosens the bound)")
    ap.add_argument("--host")
    ap.add_argument("--port", type=int)
    args = ap.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    host, port, proc = args.host or "127.0.0.1", args.port, None
    if port is None:
        if not args.serve_voice:
            ap.error("--serve-voice VOICE.onnx (or --host and --port of a running server)")
        proc = subprocess.Popen([args.etude, "serve", "-q", "--wyoming", "tcp://127.0.0.1:0",
                                 "--voice", args.serve_voice, *args.serve_args.split()],
                                stderr=subprocess.PIPE, text=True)
        port = int(re.search(r":(\d+) ", proc.stderr.readline()).group(1))
    print(f"{cpu_model()}; {host}:{port}; prebuffer {args.prebuffer_ms:.0f} ms; "
          f"{args.rounds} rounds per count")
    try:
        asyncio.run(measure(host, port, args.voice, counts, args.rounds,
                            args.prebuffer_ms / 1000, args.settle, args.work_ms,
                            proc.pid if proc else None))
    finally:
        if proc:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
