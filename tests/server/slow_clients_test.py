#!/usr/bin/env python3
"""etude serve against slow and idle clients (issue 33): connections that send half a request
line (HTTP) or half a JSON header line (Wyoming) and then nothing.

- With 200 of them open (from 127.0.0.2-5, 50 each: under the per-address limit, so all 200
  are held), a normal request from 127.0.0.1 gets its first audio within 1 s, over HTTP and
  over Wyoming.
- Past the per-address limit (200 from 127.0.0.6, limit 128) the rest are refused within 1 s,
  the refusal is logged, and a normal request is still served within 1 s.
- 1,000 of them (from 20 addresses) leave the server's resident size bounded: the listener
  holds at most --max-connections (256) and refuses the rest; growth must stay under 48 MiB
  (256 held connections at 192 KiB each, a generous bound: a connection of either protocol
  is a socket and the bytes it sent on an event loop, about 2 KiB measured; glibc's arenas
  are capped with MALLOC_ARENA_MAX=2, one more than etude serve keeps by default). Once they close the server
  answers a normal request within 1 s again.
- A client trickling a byte every 0.2 s gets 408 (HTTP) or a frame-timeout error (Wyoming)
  at --header-timeout, not never.

Standard-library Python only. Usage: slow_clients_test.py ETUDE. Exit 77 (skip) when this
process may not open 2,500 files.
"""
import json
import os
import re
import resource
import select
import socket
import subprocess
import sys
import threading
import time

from pass_fail import check, failures

ETUDE = sys.argv[1]
TEXT = "The porch light is on."
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 2500 if hard == resource.RLIM_INFINITY else min(hard, 4096)
if want < 2500:
    print(f"SKIP: this process may open {hard} files; the test needs 2500")
    sys.exit(77)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))


class Server:
    def __init__(self, *extra):
        env = dict(os.environ, MALLOC_ARENA_MAX="2")
        self.proc = subprocess.Popen([ETUDE, "serve", "--http", "127.0.0.1:0", "--wyoming",
                                      "tcp://127.0.0.1:0", *extra], stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.log = []
        ports = {}
        while len(ports) < 2:
            line = self.proc.stderr.readline()
            assert line, "the server exited"
            if m := re.search(r"(wyoming|http) on \w+://127\.0\.0\.1:(\d+)", line):
                ports[m.group(1)] = int(m.group(2))
        self.http, self.wyoming = ports["http"], ports["wyoming"]
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def connect(port, source="127.0.0.1"):
    s = socket.socket()
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


HALF = {"http": b"POST /v1/audio/sp", "wyoming": b'{"type": "synth'}


def open_slow(port, proto, count, sources):
    """`count` connections spread over `sources`, each having sent half a request."""
    socks = []
    for i in range(count):
        s = connect(port, sources[i % len(sources)])
        try:
            s.sendall(HALF[proto])
        except OSError:
            pass  # refused and reset already
        socks.append(s)
    return socks


def still_open(socks, wait=1.0):
    """How many the server still holds: after `wait`, nothing to read (no reply, no EOF)."""
    time.sleep(wait)
    readable, _, _ = select.select(socks, [], [], 0) if len(socks) < 1000 else (None, 0, 0)
    if readable is None:  # select() takes descriptors below 1024 only
        import selectors
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        readable = [k.fileobj for k, _ in sel.select(0)]
        sel.close()
    return len(socks) - len(readable)


def close_all(socks):
    for s in socks:
        s.close()
    time.sleep(0.5)  # the server sees them close (its places are free for the next case)


def first_audio_http(port):
    """Seconds from sending a speech request to the first audio byte of the reply."""
    s = connect(port)
    body = json.dumps({"input": TEXT, "response_format": "pcm"}).encode()
    t0 = time.monotonic()
    s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        assert chunk, f"closed before audio: {data[:200]!r}"
        data += chunk
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            assert head.startswith(b"HTTP/1.1 200"), head
            size_line, sep2, audio = rest.partition(b"\r\n")
            if sep2 and audio:
                break
    elapsed = time.monotonic() - t0
    s.close()
    return elapsed


def first_audio_wyoming(port):
    s = connect(port)
    t0 = time.monotonic()
    s.sendall(json.dumps({"type": "synthesize", "data": {"text": TEXT}}).encode() + b"\n")
    f = s.makefile("rb")
    while True:
        line = f.readline()
        assert line, "closed before audio"
        ev = json.loads(line)
        f.read(ev.get("data_length", 0) or 0)
        f.read(ev.get("payload_length", 0) or 0)
        if ev["type"] == "error":
            raise AssertionError(f"error event: {ev}")
        if ev["type"] == "audio-chunk":
            break
    elapsed = time.monotonic() - t0
    f.close()
    s.close()
    return elapsed


FIRST_AUDIO = {"http": first_audio_http, "wyoming": first_audio_wyoming}


def case_200_slow(srv, proto):
    port = getattr(srv, proto)
    socks = open_slow(port, proto, 200, [f"127.0.0.{i}" for i in range(2, 6)])
    try:
        held = still_open(socks, 0.5)
        check(f"{proto}: 200 slow connections all held", held == 200, f"{held} held")
        times = [FIRST_AUDIO[proto](port) for _ in range(3)]
        print(f"  {proto}: first audio beside 200 slow connections: "
              + ", ".join(f"{t * 1000:.0f} ms" for t in times))
        check(f"{proto}: first audio within 1 s beside 200 slow connections", max(times) < 1.0,
              times)
    finally:
        close_all(socks)


def case_per_address(srv, proto):
    port = getattr(srv, proto)
    socks = open_slow(port, proto, 200, ["127.0.0.6"])
    try:
        held = still_open(socks, 1.0)
        check(f"{proto}: one address holds 128 (the per-address limit), 72 refused within 1 s",
              held == 128, f"{held} held")
        check(f"{proto}: the per-address refusal is logged",
              any(l.startswith(proto) and "too many connections from 127.0.0.6" in l
                  for l in srv.log), srv.log[-5:])
        t = FIRST_AUDIO[proto](port)
        print(f"  {proto}: first audio beside one address at its limit: {t * 1000:.0f} ms")
        check(f"{proto}: served within 1 s beside an address at its limit", t < 1.0, t)
    finally:
        close_all(socks)


def case_thousand(srv, proto):
    port = getattr(srv, proto)
    time.sleep(0.5)
    before = srv.rss_kib()
    socks = open_slow(port, proto, 1000, [f"127.0.0.{i}" for i in range(10, 30)])
    try:
        held = still_open(socks, 1.0)
        during = srv.rss_kib()
        print(f"  {proto}: 1000 slow connections: {held} held, RSS {before} -> {during} KiB")
        check(f"{proto}: at most --max-connections (256) held of 1000", held <= 256, held)
        check(f"{proto}: RSS grew under 48 MiB with 1000 slow connections",
              during - before < 48 * 1024, f"{before} -> {during} KiB")
        check(f"{proto}: the total limit is logged",
              any(l.startswith(proto) and "too many connections (limit 256)" in l
                  for l in srv.log), srv.log[-5:])
    finally:
        close_all(socks)
    deadline = time.monotonic() + 10
    while True:  # the server sees the closes at its next read
        try:
            t = FIRST_AUDIO[proto](port)
            break
        except (AssertionError, OSError):
            assert time.monotonic() < deadline, "not serving after the 1000 closed"
            time.sleep(0.2)
    after = srv.rss_kib()
    print(f"  {proto}: after they closed: first audio {t * 1000:.0f} ms, RSS {after} KiB")
    check(f"{proto}: serving within 1 s after 1000 slow connections", t < 1.0, t)


def case_trickle():
    """One byte every 0.2 s never completes a head: closed at --header-timeout 1."""
    srv = Server("--header-timeout", "1", "--body-timeout", "1")
    try:
        for proto, line in (("http", b"POST /v1/audio/speech HTTP/1.1\r\nX-Slow: " + b"a" * 40),
                            ("wyoming", b'{"type": "synthesize", "data": {"text": "' + b"a" * 40)):
            s = connect(getattr(srv, proto))
            s.setblocking(False)
            t0, reply = time.monotonic(), b""
            for byte in line:
                try:
                    s.send(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.2)
                try:
                    reply += s.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    break
                if reply:
                    break
            took = time.monotonic() - t0
            s.close()
            expected = b" 408 " if proto == "http" else b"frame-timeout"
            print(f"  {proto}: trickling client answered after {took:.1f} s: {reply[:60]!r}")
            check(f"{proto}: a trickling client is cut off at --header-timeout",
                  expected in reply and took < 2.5, (took, reply[:120]))
    finally:
        srv.stop()


def main():
    srv = Server()
    try:
        for proto in ("http", "wyoming"):
            FIRST_AUDIO[proto](getattr(srv, proto))  # warm-up
            case_200_slow(srv, proto)
            case_per_address(srv, proto)
            case_thousand(srv, proto)
    finally:
        srv.stop()
    case_trickle()
    if failures:
        print(f"{len(failures)} failed: {failures}")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
