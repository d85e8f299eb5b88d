#!/usr/bin/env python3
"""etude serve holds 1,000 Wyoming connections on a bounded number of threads (issue 41).

The server is started with a soft open-file limit of 256, too low for 1,000 sockets: it must
raise the soft limit to the hard one itself. Then:

- 1,000 idle connections open; each gets `info` for its `describe`, all written before any
  reply is read.
- The server's threads (/proc/PID/status, Threads:) stay within the bound derived below, with
  the 1,000 open and after they were answered. A thread per connection would add 1,000.
- Bad input beside them: a malformed line and a header line past the 64 KiB cap each get an
  error event and a log line, and their connection closes; a client that vanishes in the
  middle of its synthesis gets a log line; a client that asks 5,000 times and reads nothing
  costs the server under 2 MiB and is dropped after --write-timeout, with a log line; a synthesis beside all this is spoken whole. Every
  other connection still answers `ping` afterwards.
- 1,000 idle HTTP connections to the same server hold no more threads either, and each
  answers GET /v1/models.
- With a hard limit too low for --max-connections, the server says so in one log line.

The bound on threads: the server's threads with no client at all (T0: the main thread, the
Wyoming and HTTP event loops, the HTTP workers, and what the engine keeps), measured once it listens and has answered one
`describe`. Idle connections add none; a synthesis is events on the loop
(synthesis_threads_test.py checks that it adds no thread), and the engine runs a built-in
voice's stream on a thread of its own for the stream's life. So with only idle and
describing clients the bound is T0 itself; measured again after the synthesis, once its
stream has ended, T0 again.

Standard-library Python only. Usage: many_connections_test.py ETUDE. Exit 77 (skip) when this
process may not open 1,100 files.
"""
import json
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

from pass_fail import check, failures

ETUDE = sys.argv[1]
CONNECTIONS = 1000
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and hard < CONNECTIONS + 100:
    print(f"SKIP: this process may open {hard} files; the test needs {CONNECTIONS + 100}")
    sys.exit(77)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Server:
    def __init__(self, nofile, *extra, http=False):
        def limit_files():
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        listen = ["--wyoming", "tcp://127.0.0.1:0"] + (["--http", "127.0.0.1:0"] if http else [])
        self.proc = subprocess.Popen([ETUDE, "serve", *listen, *extra],
                                     stderr=subprocess.PIPE, text=True, preexec_fn=limit_files)
        ports = {}
        while len(ports) < (2 if http else 1):
            line = self.proc.stderr.readline()
            assert line, "the server exited"
            if m := re.search(r"(wyoming|http) on \w+://127\.0\.0\.1:(\d+)", line):
                ports[m.group(1)] = int(m.group(2))
        self.port, self.http_port = ports["wyoming"], ports.get("http")
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def status(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(field + r":\s+(\d+)", f.read()).group(1))

    def open_files_limit(self):
        with open(f"/proc/{self.proc.pid}/limits") as f:
            m = re.search(r"Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)", f.read())
        return m.group(1), m.group(2)

    def wait_log(self, pattern, seconds=10):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for line in self.log):
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def frame(event_type, data=None):
    return (json.dumps({"type": event_type, "data": data or {}}) + "\n").encode()


class Reader:
    """Wyoming events from one socket, read whole (header line, data, payload)."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.buf += chunk
        return True

    def event(self):
        """(type, data) or None at the end of the stream."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        head = json.loads(line)
        data = head.get("data") or {}
        n, m = head.get("data_length") or 0, head.get("payload_length") or 0
        if not self._fill(n + m):
            return None
        if n:
            data.update(json.loads(self.buf[:n]))
        self.buf = self.buf[n + m:]
        return head["type"], data


def whole_event(buf):
    """The type of the first whole event in `buf` (header line, data, payload), or None."""
    line, sep, rest = buf.partition(b"\n")
    if not sep:
        return None
    head = json.loads(line)
    if len(rest) < (head.get("data_length") or 0) + (head.get("payload_length") or 0):
        return None
    return head["type"]


def replies(socks, request, verdict, seconds=60):
    """Sends `request` on every socket, then reads from each until verdict(bytes so far,
    closed) says True or False (None: not whole yet): how many said True."""
    for s in socks:
        s.sendall(request)
    sel = selectors.DefaultSelector()
    read = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        read[s] = b""
    good = 0
    deadline = time.monotonic() + seconds
    while read and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            read[s] += chunk
            said = verdict(read[s], not chunk)
            if said is not None:
                good += said
                sel.unregister(s)
                del read[s]
    sel.close()
    for s in socks:
        s.setblocking(True)
    return good


def answer_all(socks, request, expect, seconds=60):
    """How many sockets answer `request` with one whole event of type `expect`."""
    def verdict(buf, closed):
        kind = whole_event(buf)
        return kind == expect if closed or kind else None
    return replies(socks, request, verdict, seconds)


def http_answers(socks, request, seconds=60):
    """How many sockets answer `request` with the status line of a 200."""
    def verdict(buf, closed):
        return buf.startswith(b"HTTP/1.1 200 ") if closed or b"\r\n" in buf else None
    return replies(socks, request, verdict, seconds)


def main():
    server = Server((256, hard), "--max-connections", str(CONNECTIONS + 100),
                    "--max-connections-per-address", str(CONNECTIONS + 100),
                    "--max-syntheses", "2", "--idle-timeout", "600", "--write-timeout", "2",
                    http=True)
    try:
        soft_now, hard_now = server.open_files_limit()
        check("the server raised its soft open-file limit to the hard one",
              soft_now == hard_now, f"soft {soft_now}, hard {hard_now}")
        first = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        first.sendall(frame("describe"))
        check("describe answered", Reader(first).event()[0] == "info")
        first.close()
        time.sleep(0.5)
        t0 = server.status("Threads")

        socks = [socket.create_connection(("127.0.0.1", server.port), timeout=30)
                 for _ in range(CONNECTIONS)]
        time.sleep(1.0)
        idle_threads = server.status("Threads")
        check(f"{CONNECTIONS} idle connections hold no more threads than none (bound T0 = {t0})",
              idle_threads <= t0, f"{idle_threads} threads")
        got = answer_all(socks, frame("describe"), "info")
        check(f"all {CONNECTIONS} connections answer describe", got == CONNECTIONS,
              f"{got} answered")
        answered_threads = server.status("Threads")
        check(f"threads stay within the bound after {CONNECTIONS} answers",
              answered_threads <= t0, f"{answered_threads} threads, bound {t0}")

        # Bad input beside them.
        socks[0].sendall(b"this is not json\n")
        r0 = Reader(socks[0])
        ev = r0.event()
        check("a malformed line gets an error event", ev and ev[0] == "error", str(ev))
        check("... and its connection closes", r0.event() is None)
        check("... and a log line", server.wait_log(r"malformed frame"))
        socks[1].sendall(b"x" * 70000)
        r1 = Reader(socks[1])
        ev = r1.event()
        check("a header line past 64 KiB gets an error event", ev and ev[0] == "error", str(ev))
        check("... and a log line", server.wait_log(r"malformed frame: .*(header|line)"))
        long_text = "The porch light is on and the front door is locked. " * 40
        socks[2].sendall(frame("synthesize", {"text": long_text}))
        r2 = Reader(socks[2])
        while (ev := r2.event()) and ev[0] != "audio-chunk":
            pass
        socks[2].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        socks[2].close()  # a reset, in the middle of its speech
        check("a client gone mid-synthesis gets a log line",
              server.wait_log(r"wyoming \S+ connection failed during its synthesis|"
                              r"wyoming \S+ synthesize .* cancelled$"), server.log[-5:])
        # A client that asks and never reads: 6 MB of replies owed. The server stops reading
        # it once 256 KiB wait, and drops it after --write-timeout (2 s here).
        flood = socks[4]
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        flood.settimeout(5)
        rss_before = server.status("VmRSS")
        try:
            flood.sendall(frame("describe") * 5000)
        except (socket.timeout, OSError):
            pass  # the server stopped reading, or has dropped it already
        check("a client that reads none of its replies is dropped, with a log line",
              server.wait_log(r"took nothing of what was sent for --write-timeout"),
              server.log[-5:])
        grown = server.status("VmRSS") - rss_before
        check("... having cost the server under 2 MiB", grown < 2048, f"{grown} KiB")
        socks[3].sendall(frame("synthesize", {"text": "The lights are off."}))
        r3, types = Reader(socks[3]), []
        while (ev := r3.event()) and ev[0] != "audio-stop":
            types.append(ev[0])
        check("a synthesis beside them is spoken whole",
              ev is not None and types[0] == "audio-start" and "audio-chunk" in types, types)
        rest = socks[5:]
        got = answer_all(rest, frame("ping", {"text": "still here"}), "pong")
        check(f"the other {len(rest)} connections still answer", got == len(rest),
              f"{got} answered")
        for s in socks:
            s.close()
        # The streams' own threads end with them.
        deadline = time.monotonic() + 20
        while server.status("Threads") > t0 and time.monotonic() < deadline:
            time.sleep(0.1)
        check("threads back to the bound once the syntheses are done",
              server.status("Threads") <= t0, f"{server.status('Threads')} threads, bound {t0}")
        print(f"  threads: {t0} with no client, {idle_threads} with {CONNECTIONS} idle, "
              f"{answered_threads} after {CONNECTIONS} describes; open-file limit {soft_now}")

        # The HTTP endpoint on the same kind of loop: its workers are a fixed number, counted
        # in T0 (they start with the server).
        socks = [socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
                 for _ in range(CONNECTIONS)]
        time.sleep(1.0)
        http_idle = server.status("Threads")
        check(f"{CONNECTIONS} idle HTTP connections hold no more threads than none",
              http_idle <= t0, f"{http_idle} threads, bound {t0}")
        ok = http_answers(socks, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        check(f"all {CONNECTIONS} HTTP connections answer GET /v1/models", ok == CONNECTIONS,
              f"{ok} answered 200")
        for s in socks:
            s.close()
    finally:
        rc = server.stop()
    check("the server stops cleanly", rc == 0, f"exit status {rc}")

    low = Server((256, 256), "--max-connections", str(CONNECTIONS))
    try:
        check("a hard open-file limit too low is said in one log line",
              low.wait_log(r"open-file limit is 256 \(its hard limit\): about \d+ connections "
                           r"fit, not the 1000"), low.log[:6])
    finally:
        low.stop()

    if failures:
        print(f"FAILED: {failures}")
        sys.exit(1)
    print("all passed")


main()
