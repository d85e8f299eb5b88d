"""sd_etude over pipes, the way speech-dispatcher 0.11.4's server drives it:
the module process with its lines on a queue (every read with a deadline),
SPEAK and the other speaking commands with their events collected and their
audio decoded, the server's SET block, and PASS/FAIL reporting. Used by
sd_etude_protocol_test.py. Standard library only.
"""

import atexit
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time

FAILURES = []
TERMINAL = (b"702", b"703", b"704")


EMPTY_FOLDER = tempfile.mkdtemp(prefix="sd_etude_test_")
atexit.register(shutil.rmtree, EMPTY_FOLDER, True)


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        FAILURES.append(name)
    return ok


class Timeout(Exception):
    pass


class Module:
    """The module process; lines from its stdout arrive on a queue so that
    every read can have a deadline."""

    def __init__(self, binary, conf="/nonexistent/etude.conf", env=None, voice_path=None):
        # The module lists every Piper voice in the voice folders: only the
        # test's own (voice_path), whatever this machine's user installed.
        env = dict(os.environ if env is None else env, XDG_DATA_HOME=EMPTY_FOLDER)
        env.pop("ETUDE_VOICE_PATH", None)
        if voice_path:
            env["ETUDE_VOICE_PATH"] = voice_path
        self.proc = subprocess.Popen([binary, conf], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = []
        # Cleared: this side stops reading, as the server does while its
        # audio queue is full, so the module's writes block.
        self.reading = threading.Event()
        self.reading.set()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self):
        while True:
            self.reading.wait()
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.put((time.monotonic(), line))
        self.lines.put((time.monotonic(), None))

    def _read_stderr(self):
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr.append(line)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def line(self, timeout=30.0):
        try:
            t, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise Timeout(f"no line within {timeout} s")
        if line is None:
            raise Timeout("the module closed its output")
        self.last_time = t
        return line

    def message(self, timeout=30.0):
        """One reply or event: lines up to one whose 4th byte is a space
        (the server's own rule), as a list without the newlines."""
        lines = []
        while True:
            line = self.line(timeout)
            lines.append(line[:-1] if line.endswith(b"\n") else line)
            if len(line) < 4 or line[3:4] == b" ":
                return lines

    def quiet_for(self, seconds):
        """True when nothing arrives for `seconds`."""
        try:
            t, line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        self.lines.put((t, line))
        return False

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def unescape(payload):
    out = bytearray()
    i = 0
    while i < len(payload):
        b = payload[i]
        if b == 0x7D and i + 1 < len(payload):
            out.append(payload[i + 1] ^ 0x20)
            i += 2
        else:
            out.append(b)
            i += 1
    return bytes(out)


def decode_audio(lines):
    """A 705 message -> (rate, PCM bytes); raises ValueError when malformed."""
    header = {}
    payload = None
    for line in lines[:-1]:
        if not line.startswith(b"705-"):
            raise ValueError(f"bad 705 line {line[:40]!r}")
        body = line[4:]
        if body.startswith(b"AUDIO\0"):
            payload = unescape(body[6:])
        else:
            key, _, value = body.partition(b"=")
            header[key.decode()] = int(value)
    if lines[-1] != b"705 AUDIO":
        raise ValueError("705 message does not end with '705 AUDIO'")
    if set(header) != {"bits", "num_channels", "sample_rate", "num_samples", "big_endian"}:
        raise ValueError(f"705 header keys {sorted(header)}")
    if header["bits"] != 16 or header["num_channels"] != 1 or header["big_endian"] != 0:
        raise ValueError(f"705 format {header}")
    if payload is None or len(payload) != 2 * header["num_samples"]:
        raise ValueError("705 payload size does not match num_samples")
    return header["sample_rate"], payload


class Spoken:
    """Everything one SPEAK produced after its 200."""

    def __init__(self):
        self.events = []  # (kind, detail, audio bytes so far, time)
        self.audio = b""
        self.rates = set()
        self.first_audio_time = None
        self.terminal = None
        self.terminal_time = None
        self.errors = []


def speak(m, text, command="SPEAK", timeout=60.0, after_200=None, after_first=None):
    """Sends a message and reads its events to the terminal one. Returns
    (reply to SPEAK, reply after the data, Spoken, time the data ended)."""
    m.send(command + "\n")
    first = m.message(timeout)
    body = text.encode() if isinstance(text, str) else text
    # The server's dot escaping: a line starting with '.' gets another.
    lines = body.split(b"\n")
    body = b"\n".join(b"." + ln if ln.startswith(b".") else ln for ln in lines)
    m.send(body + b"\n.\n")
    sent = time.monotonic()
    second = m.message(timeout)
    spoken = Spoken()
    if not second[-1].startswith(b"200"):
        return first, second, spoken, sent
    if after_200:
        after_200()
    while True:
        msg = m.message(timeout)
        code = msg[-1][:3]
        if code == b"705":
            try:
                rate, pcm = decode_audio(msg)
            except ValueError as e:
                spoken.errors.append(str(e))
                continue
            if spoken.first_audio_time is None:
                spoken.first_audio_time = m.last_time
            spoken.rates.add(rate)
            spoken.audio += pcm
            spoken.events.append(("705", len(pcm), len(spoken.audio), m.last_time))
        elif code == b"700":
            name = msg[0][4:].decode(errors="replace") if len(msg) == 2 else None
            if msg[-1] != b"700 INDEX MARK" or name is None:
                spoken.errors.append(f"bad 700 message {msg}")
            spoken.events.append(("700", name, len(spoken.audio), m.last_time))
        else:
            spoken.events.append((code.decode(errors="replace"), None, len(spoken.audio),
                                  m.last_time))
        if after_first and len(spoken.events) == 1:
            after_first()
        if code in TERMINAL:
            spoken.terminal = code.decode()
            spoken.terminal_time = m.last_time
            return first, second, spoken, sent


def etude_raw(etude, text, voice="slt", ssml=False):
    return subprocess.run([etude, "say", "--voice", voice, "--raw", *(["--ssml"] if ssml else []),
                           text], check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          timeout=120).stdout


def order_ok(spoken):
    """701 first, exactly one terminal, last."""
    kinds = [e[0] for e in spoken.events]
    return (bool(kinds) and kinds[0] == "701" and kinds.count("701") == 1
            and sum(k in ("702", "703", "704") for k in kinds) == 1
            and kinds[-1] in ("702", "703", "704"))


def startup(m):
    m.send("INIT\n")
    r = m.message(120)
    check("INIT replies 299-... then 299 OK LOADED SUCCESSFULLY",
          len(r) >= 2 and r[0].startswith(b"299-") and r[-1] == b"299 OK LOADED SUCCESSFULLY",
          repr(r))
    m.send("AUDIO\n")
    r1 = m.message()
    m.send("audio_output_method=server\n.\n")
    r2 = m.message()
    check("AUDIO server: 207 then 203 OK AUDIO INITIALIZED",
          r1 == [b"207 OK RECEIVING AUDIO SETTINGS"] and r2 == [b"203 OK AUDIO INITIALIZED"],
          repr((r1, r2)))
    # Another method, or a log level that is not one: 303 alone, as module_process.c
    # and module_utils.c answer.
    for command, block in [("AUDIO", "audio_output_method=pulse"), ("LOGLEVEL", "log_level=abc"),
                           ("LOGLEVEL", "verbosity=3")]:
        m.send(command + "\n")
        m.message()
        m.send(block + "\n.\n")
        r = m.message()
        check(f"{command} {block}: 303 ERROR INVALID PARAMETER OR VALUE",
              r == [b"303 ERROR INVALID PARAMETER OR VALUE"], repr(r))
    m.send("LOGLEVEL\n")
    r1 = m.message()
    m.send("log_level=3\n.\n")
    r2 = m.message()
    check("LOGLEVEL: 207 then 203 OK LOGLEVEL SET",
          r1 == [b"207 OK RECEIVING LOGLEVEL SETTINGS"] and r2 == [b"203 OK LOGLEVEL SET"],
          repr((r1, r2)))
    m.send("LIST VOICES\n")
    r = m.message()
    fields = [ln[4:].split(b"\t") for ln in r[:-1]]
    names = {f[0] for f in fields}
    check("LIST VOICES: 200-NAME\\tLANG\\tVARIANT lines with slt, rms, awb (en), then 200 OK",
          r[-1] == b"200 OK VOICE LIST SENT" and all(ln.startswith(b"200-") for ln in r[:-1])
          and all(len(f) == 3 and all(f) for f in fields)
          and {b"slt", b"rms", b"awb"} <= names
          and all(f[1] == b"en" for f in fields if f[0] in (b"slt", b"rms", b"awb")), repr(r))


def server_set(m, **over):
    """A SET block as 0.11.4's server sends it before every message."""
    values = dict(pitch="0", pitch_range="0", rate="0", volume="0", punctuation_mode="none",
                  spelling_mode="off", cap_let_recogn="none", language="en-US",
                  voice="male1", synthesis_voice="NULL")
    values.update(over)
    m.send("SET\n")
    r1 = m.message()
    m.send("".join(f"{k}={v}\n" for k, v in values.items()) + ".\n")
    r2 = m.message()
    return r1, r2
