#!/usr/bin/env python3
"""Wyoming syntheses hold no thread each (issue 41): they are events on the server's loop.

`etude serve` with a Piper voice (tests/data/piper/test_medium.onnx, a full-size medium
network with random weights) and --max-syntheses 16. One client is spoken to while the
server's threads (/proc/PID/status, Threads:) are sampled: T1, which holds every thread
the engine starts for network streams (its step pool, its analysis threads). Then 16
clients are spoken to at once, each a long text, and the threads are sampled again while
all 16 are speaking: at most T1 + 2. A thread per synthesis (the synthesis pool this
replaced) made that T1 + 15. Every client's audio ends with audio-stop, and each equals
the one client's, since they spoke the same text with the same seed.

Standard-library Python only. Usage: synthesis_threads_test.py ETUDE VOICE.
"""
import json
import re
import socket
import subprocess
import sys
import threading
import time

from pass_fail import check, failures

ETUDE, VOICE = sys.argv[1], sys.argv[2]
CLIENTS = 16
TEXT = "The porch light is on and the front door is locked. " * 6


def frame(event_type, data=None):
    return (json.dumps({"type": event_type, "data": data or {}}) + "\n").encode()


def read_reply(sock):
    """The audio of one synthesize (bytes), read until audio-stop; None on an error or end."""
    buf, audio = b"", bytearray()
    while True:
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        head = json.loads(line)
        need = (head.get("data_length") or 0) + (head.get("payload_length") or 0)
        while len(buf) < need:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        payload = buf[head.get("data_length") or 0:need]
        buf = buf[need:]
        if head["type"] == "error":
            return None
        if head["type"] == "audio-chunk":
            audio += payload
        if head["type"] == "audio-stop":
            return bytes(audio)


def threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


def speak_while_sampling(port, pid, clients):
    """Each of `clients` connections asks for TEXT at once; returns (replies, the most
    threads seen while every one of them was still speaking)."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=120) for _ in range(clients)]
    replies = [None] * clients
    readers = [threading.Thread(target=lambda i=i: replies.__setitem__(i, read_reply(socks[i])))
               for i in range(clients)]
    for s in socks:
        s.sendall(frame("synthesize", {"text": TEXT}))  # the default voice: VOICE
    for r in readers:
        r.start()
    most = 0
    while all(r.is_alive() for r in readers):
        most = max(most, threads(pid))
        time.sleep(0.02)
    for r in readers:
        r.join()
    for s in socks:
        s.close()
    return replies, most


def main():
    proc = subprocess.Popen([ETUDE, "serve", "--wyoming", "tcp://127.0.0.1:0", "--voice", VOICE,
                             "--max-syntheses", str(CLIENTS)],
                            stderr=subprocess.PIPE, text=True)
    try:
        port = None
        while port is None:
            line = proc.stderr.readline()
            assert line, "the server exited"
            if m := re.search(r"wyoming on tcp://127\.0\.0\.1:(\d+)", line):
                port = int(m.group(1))
        threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
        (alone,), t1 = speak_while_sampling(port, proc.pid, 1)
        check("one client is spoken to", alone is not None and len(alone) > 0)
        replies, t16 = speak_while_sampling(port, proc.pid, CLIENTS)
        print(f"  threads while speaking: {t1} for one client, {t16} for {CLIENTS} at once")
        check(f"{CLIENTS} syntheses at once hold no thread each (at most {t1} + 2)",
              t16 <= t1 + 2, f"{t16} threads")
        check(f"all {CLIENTS} are spoken whole, each equal to the one client's",
              all(r == alone for r in replies),
              [None if r is None else len(r) for r in replies])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
