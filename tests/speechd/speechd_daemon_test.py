#!/usr/bin/python3
"""sd_etude inside the real speech-dispatcher daemon, headless.

Usage: speechd_daemon_test.py SD_ETUDE ETUDE

Starts a private speech-dispatcher (its own configuration, socket, pid
file and logs in a temporary folder; nothing of the user's or the system's
is read or touched) with sd_etude as its only module, and talks to it as
a screen reader would: through python3-speechd and spd-say.

Audio is captured without a sound card: the daemon's ALSA output goes to
an ALSA `file` PCM (slave "null") whose file is a pipe into a small reader
that appends the bytes to a file and logs when each read arrived. The
"null" device consumes audio at once, so playback here is faster than real
time: BEGIN, marks, END and CANCEL come as soon as the daemon has written
the audio, not when a listener would hear it. (A reader that consumed the
pipe at the audio's rate was tried: cancel then gave no CANCEL within 10 s
and the daemon ignored SIGTERM, apparently because its playback thread sat
in ALSA's blocking write() to the pipe, out of reach of its stop request.)

Checks: the module is the one loaded and answering (modules, voices, log);
a plain sentence gives BEGIN then END and its captured audio equals
`etude say --voice slt --raw` scaled by the daemon's fixed ALSA volume;
SSML marks arrive in order between BEGIN and END; `spd-say -o etude -w`
exits 0 and its text is in the capture; cancel mid-speech gives CANCEL and
stops the audio; the daemon, module and reader exit on SIGTERM. Prints
PASS/FAIL lines and timings; exits 1 on failure, 77 (skip) when
speech-dispatcher, spd-say, its ALSA plugin or python3-speechd is missing.
"""
import glob
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

from sd_module_client import FAILURES, check  # the PASS/FAIL lines both speechd tests print

SKIP = 77
BYTES_PER_SECOND = 32000  # sd_etude's built-in voices: 16 kHz, 16-bit, mono
# output.c (0.11.4) sets the server's audio volume to 85, and alsa.c scales
# every sample by (85 + 100) / 200 in single precision, truncating.
ALSA_GAIN = struct.unpack("f", struct.pack("f", (85 + 100) / 200.0))[0]


def skip(why):
    print("SKIP " + why, flush=True)
    sys.exit(SKIP)


# The pipe reader behind the ALSA file PCM: appends what it reads to a
# file and logs "monotonic-time bytes" for every read (CLOCK_MONOTONIC is
# shared by all processes, so the times compare with the test's own).
READER = r'''
import os, sys, time
out = open(sys.argv[1], "ab", buffering=0)
log = open(sys.argv[2], "a")
while True:
    b = os.read(0, 65536)
    if not b:
        break
    now = time.monotonic()
    out.write(b)
    log.write("%.6f %d\n" % (now, len(b)))
    log.flush()
'''


class Abort(Exception):
    pass


class Daemon:
    def __init__(self, sd_etude, root):
        self.root = root
        self.conf = os.path.join(root, "conf")
        self.home = os.path.join(root, "home")
        self.run = os.path.join(root, "run")
        self.logdir = os.path.join(root, "log")
        for d in (self.conf, self.home, self.run, self.logdir):
            os.makedirs(d)
        self.sock = os.path.join(self.run, "speechd.sock")
        self.capture = os.path.join(root, "capture.raw")
        self.capture_log = os.path.join(root, "capture.log")
        reader = os.path.join(root, "reader.py")
        with open(reader, "w") as f:
            f.write(READER)
        with open(os.path.join(self.conf, "speechd.conf"), "w") as f:
            f.write(f'AddModule "etude" "{sd_etude}" "etude.conf"\n'
                    'DefaultModule etude\n'
                    'AudioOutputMethod "alsa"\n'
                    'AudioALSADevice "etudecapture"\n')
        # ALSA reads $HOME/.asoundrc; the daemon gets this HOME only.
        with open(os.path.join(self.home, ".asoundrc"), "w") as f:
            f.write('pcm.etudecapture {\n'
                    '  type file\n'
                    '  slave.pcm "null"\n'
                    f'  file "|/usr/bin/python3 {reader} {self.capture} {self.capture_log}"\n'
                    '  format "raw"\n'
                    '}\n')
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SPEECHD_", "XDG_", "ALSA_", "PULSE_"))}
        self.env.update(HOME=self.home, XDG_RUNTIME_DIR=self.run,
                        XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                        XDG_DATA_HOME=os.path.join(self.home, ".local", "share"))
        self.address = "unix_socket:" + self.sock
        self.cmd = ["speech-dispatcher", "-s", "-t", "0", "-C", self.conf,
                    "-c", "unix_socket", "-S", self.sock,
                    "-P", os.path.join(self.run, "speechd.pid"), "-L", self.logdir, "-l", "4"]
        self.out = open(os.path.join(root, "daemon.out"), "wb")
        # Its own process group: the module and the pipe reader are its
        # children, and all of them are ended together at the end.
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_ready(self, timeout=30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            if os.path.exists(self.sock):
                return True
            time.sleep(0.05)
        return False

    def log(self):
        """The daemon's log: its standard error until the log file is
        open, then the file."""
        text = ""
        for path in (os.path.join(self.root, "daemon.out"),
                     os.path.join(self.logdir, "speech-dispatcher.log")):
            try:
                with open(path, "rb") as f:
                    text += f.read().decode("utf-8", "replace")
            except OSError:
                pass
        return text

    def captured(self):
        """(PCM bytes so far, [(time, bytes)] reads)."""
        try:
            with open(self.capture, "rb") as f:
                data = f.read()
            with open(self.capture_log) as f:
                reads = [(float(t), int(n))
                         for t, n in (line.split() for line in f if line.strip())]
        except OSError:
            return b"", []
        return data, reads

    def stop(self):
        """SIGTERM, then SIGKILL for whatever of its group is left; True if
        nothing was left to kill."""
        pgid = self.proc.pid
        clean = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                clean = False
        # The module and the reader exit once the daemon has gone; give
        # them a moment, then kill any that did not.
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            clean = False
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.out.close()
        return clean


class Events:
    """Every SSIP event of the connection, with its arrival time, keyed by
    message id. Recorded at the connection level, so that an event that
    arrives before speak() has returned (python3-speechd's documented race
    for per-message callbacks) is not lost; the library's own per-message
    callbacks still run after it."""

    def __init__(self, client):
        self.lock = threading.Condition()
        self.by_msg = {}
        self.inner = client._callback_handler
        client._conn.set_callback(self)

    def __call__(self, msg_id, client_id, type, **kwargs):
        with self.lock:
            self.by_msg.setdefault(msg_id, []).append(
                (time.monotonic(), type, kwargs.get("index_mark")))
            self.lock.notify_all()
        self.inner(msg_id, client_id, type, **kwargs)

    def wait_for(self, msg_id, types, timeout):
        """The first event of msg_id whose type is in types, or None."""
        end = time.monotonic() + timeout
        with self.lock:
            while True:
                for ev in self.by_msg.get(msg_id, []):
                    if ev[1] in types:
                        return ev
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.lock.wait(left)

    def of(self, msg_id):
        with self.lock:
            return list(self.by_msg.get(msg_id, []))


def speak(client, text):
    t = time.monotonic()
    speak.wall = time.time()
    result = client.speak(text)
    return int(result[2][0]), t


LOG_AUDIO = re.compile(r"\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}) : (\d+)\] speechd: +"
                       r"speak_queue Sending \d+ samples to audio")


def first_device_write(log, after):
    """Wall-clock time of the daemon's first write of audio to its device
    (its playback thread's log line, to the microsecond) after `after`."""
    for m in LOG_AUDIO.finditer(log):
        t = time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")) + int(m.group(2)) / 1e6
        if t >= after:
            return t
    return None


def samples(pcm):
    n = len(pcm) // 2
    return struct.unpack("<%dh" % n, pcm[:2 * n])


def scaled(x):
    """What alsa.c writes for sample x: float product, truncated to short."""
    p = struct.unpack("f", struct.pack("f", x * ALSA_GAIN))[0]
    return int(p)


def nonzero(values):
    """The non-zero samples, packed back to 16-bit little-endian bytes so
    that sequences can be searched with bytes.find."""
    kept = [v for v in values if v]
    return struct.pack("<%dh" % len(kept), *kept)


def first_read_after(reads, t):
    for rt, _ in reads:
        if rt >= t:
            return rt
    return None


def first_capture_after(daemon, t, timeout=5.0):
    """The capture's reads and the first of them after `t`, waiting up to `timeout` for it:
    END can come before ALSA's file plugin has passed the message's last period on to the
    reader (it writes whole periods, the rest at drain), so right after END the reader may
    not have seen a byte yet."""
    deadline = time.monotonic() + timeout
    while True:
        _, reads = daemon.captured()
        first = first_read_after(reads, t)
        if first is not None or time.monotonic() > deadline:
            return reads, first
        time.sleep(0.05)


def duration(pcm):
    return len(pcm) / BYTES_PER_SECOND


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    sd_etude, etude = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for tool in ("speech-dispatcher", "spd-say"):
        if shutil.which(tool) is None:
            skip(f"{tool} is not installed (Debian: speech-dispatcher)")
    if not glob.glob("/usr/lib/*/speech-dispatcher/spd_alsa.so") + \
            glob.glob("/usr/lib/speech-dispatcher/spd_alsa.so"):
        skip("speech-dispatcher's ALSA plugin spd_alsa.so is not installed "
             "(Debian: speech-dispatcher-audio-plugins)")
    try:
        import speechd
    except ImportError:
        skip("python3-speechd is not installed")

    def ref_audio(text):
        return subprocess.run([etude, "say", "--voice", "slt", "--raw", text], check=True,
                              stdout=subprocess.PIPE, timeout=60).stdout

    plain_ref = say_ref = None
    root = tempfile.mkdtemp(prefix="sd-etude-daemon-")
    daemon = Daemon(sd_etude, root)
    client = None

    # A client call blocks for good if the daemon stops answering; before
    # ctest's 300 s timeout, end the daemon's whole group (it is in its own
    # session, out of ctest's reach) and fail.
    def watchdog():
        print(f"FAIL the test did not finish within 240 s (logs kept in {root})", flush=True)
        try:
            os.killpg(daemon.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os._exit(1)

    timer = threading.Timer(240, watchdog)
    timer.daemon = True
    timer.start()
    try:
        if not check("the private daemon starts and opens its socket", daemon.wait_ready()):
            print(daemon.log()[-3000:])
            raise Abort()
        print("daemon: " + " ".join(daemon.cmd), flush=True)
        client = speechd.SSIPClient("etude-test", address=daemon.address, autospawn=False)
        events = Events(client)
        client.set_output_module("etude")

        # ---- the module really is sd_etude ---------------------------------
        modules = list(client.list_output_modules())
        check("the daemon lists etude as its output module", modules == ["etude"], f"{modules}")
        voices = sorted(v[0] for v in client.list_synthesis_voices())
        check("LIST VOICES through the daemon gives slt, rms, awb",
              {"slt", "rms", "awb"} <= set(voices), f"{voices}")
        log = daemon.log()
        check("the daemon log shows sd_etude loaded",
              f"binary {sd_etude}" in log and "Module etude loaded" in log)
        client.set_synthesis_voice("slt")

        # ---- a plain sentence ----------------------------------------------
        plain = "Hello from the etude module."
        plain_ref = ref_audio(plain)
        msg, t0 = speak(client, plain)
        wall0 = speak.wall
        begin = events.wait_for(msg, ("begin",), 20)
        end = events.wait_for(msg, ("end", "cancel"), 20)
        kinds = [e[1] for e in events.of(msg)]
        check("plain text: BEGIN then END", kinds == ["begin", "end"], f"{kinds}")
        reads, first_audio = first_capture_after(daemon, t0)
        if check("plain text: audio reached the device", begin and end and first_audio):
            print(f"TIME plain: speak() to BEGIN {1000 * (begin[0] - t0):.0f} ms, to first "
                  f"captured audio {1000 * (first_audio - t0):.0f} ms, to END "
                  f"{1000 * (end[0] - t0):.0f} ms ({duration(plain_ref):.2f} s of audio; "
                  f"the device got it in {len([r for r in reads if r[0] >= t0])} writes, the "
                  f"last {1000 * (reads[-1][0] - t0):.0f} ms after speak())", flush=True)
            # ALSA's file plugin writes its file in large blocks, so the
            # reader's first byte comes late; the daemon's own log says when
            # its playback thread handed the first audio to ALSA.
            first = first_device_write(daemon.log(), wall0)
            if check("the daemon log shows the first audio written to the device", first):
                print(f"TIME plain: speak() to the daemon's first audio write to ALSA "
                      f"{1000 * (first - wall0):.0f} ms", flush=True)

        # ---- SSML with marks ------------------------------------------------
        client.set_data_mode(speechd.DataMode.SSML)
        ssml = '<speak>One. <mark name="m1"/>Two. <mark name="m2"/>Three.</speak>'
        msg, t0 = speak(client, ssml)
        begin = events.wait_for(msg, ("begin",), 20)
        end = events.wait_for(msg, ("end", "cancel"), 20)
        evs = events.of(msg)
        seq = [e[2] if e[1] == "index_marks" else e[1] for e in evs]
        check("SSML: BEGIN, m1, m2, END in that order", seq == ["begin", "m1", "m2", "end"],
              f"{seq}")
        if begin and end:
            print(f"TIME ssml: speak() to BEGIN {1000 * (begin[0] - t0):.0f} ms, to END "
                  f"{1000 * (end[0] - t0):.0f} ms", flush=True)
        client.set_data_mode(speechd.DataMode.TEXT)

        # ---- spd-say -------------------------------------------------------
        env = dict(daemon.env, SPEECHD_ADDRESS=daemon.address)
        say_text = "Spoken by spd-say."
        say_ref = ref_audio(say_text)
        r = subprocess.run(["spd-say", "-o", "etude", "-y", "slt", "-w", say_text], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        check("spd-say -o etude -w exits 0", r.returncode == 0,
              f"rc {r.returncode} {r.stdout.decode(errors='replace').strip()}")
        r = subprocess.run(["spd-say", "-O"], env=env, stdout=subprocess.PIPE, timeout=30)
        check("spd-say -O lists etude", b"etude" in r.stdout.split(),
              " ".join(r.stdout.decode(errors="replace").split()))

        # ---- cancel mid-speech ---------------------------------------------
        # Long enough that the module is still synthesising (about 100 times
        # faster than real time here) when the cancel comes.
        long_text = " ".join(f"This is sentence number {n} of a long text that is "
                             "cancelled before it ends." for n in range(1, 301))
        msg, t0 = speak(client, long_text)
        begin = events.wait_for(msg, ("begin",), 20)
        time.sleep(0.3)
        check("the long text is still speaking 0.3 s after BEGIN",
              begin is not None and [e[1] for e in events.of(msg)] == ["begin"],
              f"{[e[1] for e in events.of(msg)]}")
        tc = time.monotonic()
        client.cancel()
        last = events.wait_for(msg, ("cancel", "end"), 10)
        ok = last is not None and last[1] == "cancel"
        check("cancel mid-speech gives CANCEL", ok,
              f"{[e[1] for e in events.of(msg)]}")
        if ok:
            print(f"TIME cancel: cancel() to CANCEL {1000 * (last[0] - tc):.0f} ms", flush=True)
        time.sleep(1.0)
        _, reads = daemon.captured()
        after = sum(n for t, n in reads if t > tc + 0.5)
        check("no audio reaches the device later than 0.5 s after cancel", after == 0,
              f"{after} bytes")
        captured_long = sum(n for t, n in reads if t >= t0)
        print(f"cancelled after about {captured_long / BYTES_PER_SECOND:.1f} s of its audio had "
              "been written to the device", flush=True)
        check("no END for the cancelled message",
              "end" not in [e[1] for e in events.of(msg)])

        # ---- the captured audio of the plain sentence ------------------------
        # speech-dispatcher's ALSA output pads every chunk it plays with
        # silence up to the device's period and scales it by its volume, so
        # the capture is compared with `etude say` scaled the same way, both
        # without their zero samples.
        log = daemon.log()
        check("the daemon log has no module error",
              "not working" not in log and "Can't say message" not in log)
    except Abort:
        pass
    except Exception as e:  # a client error or timeout: a failure, cleaned up
        check("no unexpected error", False, f"{type(e).__name__}: {e}")
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:
                pass
        clean = daemon.stop()
        timer.cancel()
        check("the daemon, module and reader exit on SIGTERM", clean)

    # ---- the captured audio ----------------------------------------------
    # Read after the daemon has closed the device, so that ALSA has written
    # out everything. speech-dispatcher's ALSA output pads every chunk it
    # plays with silence up to the device's period and scales it by its
    # volume, so the capture is compared with `etude say` scaled the same
    # way, both without their zero samples.
    if plain_ref is not None:
        data, _ = daemon.captured()
        got = nonzero(samples(data))
        want = nonzero(scaled(s) for s in samples(plain_ref))
        check("the captured audio is not silent", len(got) > 1000,
              f"{len(got) // 2} non-zero samples")
        same = got[:len(want)] == want
        detail = f"{len(want) // 2} non-zero samples"
        if not same:
            diff = next((i for i in range(0, min(len(got), len(want)), 2)
                         if got[i:i + 2] != want[i:i + 2]), min(len(got), len(want)))
            detail += f"; first difference at non-zero sample {diff // 2}"
        check("the captured audio of the plain sentence (the first message) equals `etude "
              "say --voice slt --raw` x 0.925 (the daemon's ALSA volume), sample for sample",
              same, detail)
        if say_ref is not None:
            want = nonzero(scaled(s) for s in samples(say_ref))
            at = got.find(want)
            while at > 0 and at % 2:
                at = got.find(want, at + 1)
            check("the audio of spd-say's text is in the capture, sample for sample",
                  at >= 0, f"{len(want) // 2} non-zero samples")
    if FAILURES:
        print(f"logs and capture kept in {root}", flush=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
