#!/usr/bin/env python3
"""Beyond one machine: two `etude serve` instances behind HAProxy (TCP mode, round robin);
Wyoming clients (the real `wyoming` package) connect to HAProxy only. The server keeps no state
between connections, so every request is served whole by whichever instance gets it, equal to
the offline render, and both instances serve.

Usage: haproxy_test.py ETUDE. Exit 77 (skip) without haproxy or the `wyoming` package.
"""
import asyncio
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

if not shutil.which("haproxy"):
    print("SKIP: haproxy is not installed (Debian package haproxy)")
    sys.exit(77)
try:
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import (Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop,
                             SynthesizeStopped, SynthesizeVoice)
except ImportError as e:
    print(f"SKIP: the `wyoming` package is not installed ({e})")
    sys.exit(77)

ETUDE = sys.argv[1]
TEXTS = ["The garage door is closed.", "It is going to rain this afternoon.",
         "Your package was delivered. It is on the porch.", "Good night!"]


def start_server():
    proc = subprocess.Popen([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0"],
                            stderr=subprocess.PIPE, text=True)
    port = int(re.search(r"127\.0\.0\.1:(\d+)", proc.stderr.readline()).group(1))
    log = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    return proc, port, log


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def request(port, i):
    text, voice = TEXTS[i % len(TEXTS)], ["slt", "rms", "awb"][i % 3]
    async with AsyncTcpClient("127.0.0.1", port) as c:
        if i % 2:
            await c.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
            for k in range(0, len(text), 7):
                await c.write_event(SynthesizeChunk(text=text[k:k + 7]).event())
            await c.write_event(SynthesizeStop().event())
        else:
            await c.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        pcm = bytearray()
        while True:
            ev = await asyncio.wait_for(c.read_event(), 60)
            assert ev is not None and not Error.is_type(ev.type), ev
            if AudioChunk.is_type(ev.type):
                pcm += AudioChunk.from_event(ev).audio
            if (AudioStop.is_type(ev.type) and not i % 2) or SynthesizeStopped.is_type(ev.type):
                break
    ref = subprocess.run([ETUDE, "say", "--voice", voice, "--raw", text], check=True,
                         capture_output=True).stdout
    assert bytes(pcm) == ref, f"request {i}: {len(pcm)} bytes, offline render {len(ref)}"


async def run_clients(port, n):
    await asyncio.gather(*[request(port, i) for i in range(n)])


def main():
    servers = [start_server(), start_server()]
    front = free_port()
    workdir = tempfile.mkdtemp()
    cfg = os.path.join(workdir, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(f"""global
    maxconn 256
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend wyoming
    bind 127.0.0.1:{front}
    default_backend etude
backend etude
    balance roundrobin
    server a 127.0.0.1:{servers[0][1]} check
    server b 127.0.0.1:{servers[1][1]} check
""")
    proxy = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 10
        while True:  # until HAProxy listens
            try:
                socket.create_connection(("127.0.0.1", front), timeout=1).close()
                break
            except OSError:
                assert proxy.poll() is None, proxy.stdout.read()
                assert time.monotonic() < deadline, "haproxy did not start"
                time.sleep(0.1)
        asyncio.run(run_clients(front, 12))
        # Each instance logs a request just after its last event is sent.
        deadline = time.monotonic() + 10
        while True:
            served = [sum(" spoken" in l for l in log) for _, _, log in servers]
            if sum(served) >= 12 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        print(f"12 requests through HAProxy, each equal to its offline render; "
              f"served per instance: {served}")
        assert all(n > 0 for n in served), f"one instance served nothing: {served}"
        assert sum(served) == 12, served
        print("PASS haproxy")
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)
        for proc, _, _ in servers:
            proc.terminate()
            assert proc.wait(timeout=30) == 0


if __name__ == "__main__":
    main()
