#!/usr/bin/python3
"""Latency of speech-dispatcher output modules: sd_etude against espeak-ng
and Piper through the generic module, side by side in one run.

Usage:
    /usr/bin/python3 bench/speechd_latency.py \\
        --sd-etude build/speechd/sd_etude \\
        --piper build/pyenv/bin/piper \\
        --piper-voice PATH/en_US-joe-medium.onnx \\
        [--runs 10] [--scratch /tmp/sdbench] [--rows etude-slt,etude-joe,espeak-ng,piper-generic]

Needs Debian 12's speech-dispatcher 0.11.4, speech-dispatcher-audio-plugins
(spd_alsa.so), speech-dispatcher-espeak-ng (sd_espeak-ng), python3-speechd,
alsa-utils (aplay) and piper-tts (`piper`). No sound card is used and
nothing of the user's or the system's speech-dispatcher is touched: every
row gets its own private daemon (its own config, socket, pid file, HOME,
XDG_RUNTIME_DIR and logs under the scratch folder).

The rows:
  etude-slt      sd_etude, built-in voice slt (16 kHz), server audio
  etude-joe      sd_etude, Piper voice en_US-joe-medium (22.05 kHz) run by
                 LibEtude on the CPU, server audio (same module process as
                 etude-slt: both voices are loaded when the module starts)
  espeak-ng      Debian's sd_espeak-ng with its stock config, server audio
  piper-generic  sd_generic running, for each message (each chunk of at
                 most 300 characters), the pipeline
                   printf %s '$DATA' | piper --model joe.onnx --output-raw
                     | <timestamping tee> | aplay -D <capture PCM> -t raw ...
                 i.e. the `piper --output-raw | player` recipe from Piper's
                 documentation wired into a generic-module config the way
                 the community piper-generic.conf files do (a fresh piper
                 process, which loads the model, per message).

Audio path. The daemon's ALSA output (and aplay in the generic row) goes to
an ALSA `file` PCM over the `null` device, whose file is a pipe into a reader
(this program with --reader) that logs the CLOCK_MONOTONIC time of every
read. The null device takes audio as fast as it comes, so nothing here is
paced at the audio's rate.

What is measured, per message, from just before the client's speak():
  BEGIN        the BEGIN event reaching the client (python3-speechd).
  first audio  the first PCM handed to the audio output:
               - server-audio rows: the daemon's playback thread logging
                 "Sending N samples to audio" (-l 4, microsecond time stamps)
                 just before its first write to ALSA;
               - piper-generic: the first bytes piper writes to its stdout,
                 as read by the timestamping tee in front of aplay (aplay
                 still has to start and open ALSA after that; its start runs
                 in parallel with piper's).
  at file PCM  the first bytes reaching the file-PCM reader (all rows). ALSA's
               file plugin holds back about one buffer of audio before it
               writes its file, and that buffer differs between the daemon's
               ALSA output and aplay, so this column is only a cross-check.
  END          the END event.
Each row: one warm-up message, then --runs messages of the same sentence,
one at a time (the next one is sent after END and a 0.3 s pause).

Cancel, per row, --runs times: a long text (300 sentences) is spoken;
0.5 s after its BEGIN the client calls cancel() (SSIP CANCEL self); we time
cancel() to the CANCEL event, and cancel() to the last audio write seen at
the first-audio point above (0 when none came after the cancel). A second
series cancels 0.5 s after the first audio instead of after BEGIN, which
matters for piper-generic: its BEGIN comes before piper has started.

Prints a markdown table and writes all samples to SCRATCH/results.json.
Every process it starts (daemons, modules, pipelines, readers) is ended
before it exits; the scratch folder is left for inspection.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

SENTENCE = "The quick brown fox jumps over the lazy dog by the river."
LONG_TEXT = " ".join(f"This is sentence number {n} of a long text that is "
                     "cancelled before it ends." for n in range(1, 301))
SELF = os.path.abspath(__file__)
PY = "/usr/bin/python3"
MODULE_DIR = "/usr/lib/speech-dispatcher-modules"


# ---------------------------------------------------------------- helpers ---

def reader_main(out_path, log_path):
    """The file-PCM reader: append the audio, log 'monotonic bytes'."""
    out = open(out_path, "ab", buffering=0)
    log = open(log_path, "a")
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        now = time.monotonic()
        out.write(b)
        log.write("%.6f %d\n" % (now, len(b)))
        log.flush()


def tee_main(log_path):
    """stdin to stdout, logging 'monotonic bytes' for every read."""
    log = open(log_path, "a")
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        now = time.monotonic()
        log.write("%.6f %d\n" % (now, len(b)))
        log.flush()
        view = memoryview(b)
        while view:
            n = os.write(1, view)
            view = view[n:]
    return 0


def read_timed(path):
    """[(monotonic time, bytes)] from a reader/tee log."""
    try:
        with open(path) as f:
            return [(float(a), int(b)) for a, b in (l.split() for l in f if l.strip())]
    except (OSError, ValueError):
        return []


LOG_AUDIO = re.compile(r"\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}) : (\d+)\] speechd: +"
                       r"speak_queue Sending (\d+) samples to audio")


class DaemonLogAudio:
    """The daemon's 'Sending N samples to audio' lines, as (wall time, N),
    read incrementally."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.rest = ""
        self.items = []

    def update(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
                self.pos += len(data)
        except OSError:
            return self.items
        text = self.rest + data.decode("utf-8", "replace")
        cut = text.rfind("\n") + 1
        self.rest = text[cut:]
        for m in LOG_AUDIO.finditer(text[:cut]):
            t = time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"))
            self.items.append((t + int(m.group(2)) / 1e6, int(m.group(3))))
        return self.items


# ----------------------------------------------------------------- daemon ---

class Daemon:
    """A private speech-dispatcher with the given AddModule lines."""

    def __init__(self, root, modules, extra_files):
        self.root = root
        self.conf = os.path.join(root, "conf")
        self.home = os.path.join(root, "home")
        self.run = os.path.join(root, "run")
        self.logdir = os.path.join(root, "log")
        for d in (self.conf, os.path.join(self.conf, "modules"), self.home, self.run,
                  self.logdir):
            os.makedirs(d, exist_ok=True)
        for path, text in extra_files.items():
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        self.sock = os.path.join(self.run, "speechd.sock")
        self.capture_log = os.path.join(root, "capture.log")
        self.gen_log = os.path.join(root, "gen-capture.log")
        lines = [f'AddModule "{n}" "{b}" "{c}"\n' for n, b, c in modules]
        with open(os.path.join(self.conf, "speechd.conf"), "w") as f:
            f.write("".join(lines) + f'DefaultModule {modules[0][0]}\n'
                    'AudioOutputMethod "alsa"\nAudioALSADevice "sdcapture"\n')
        with open(os.path.join(self.home, ".asoundrc"), "w") as f:
            for name, stem in (("sdcapture", "capture"), ("gencapture", "gen-capture")):
                f.write(f'pcm.{name} {{\n  type file\n  slave.pcm "null"\n'
                        f'  file "|{PY} {SELF} --reader {root}/{stem}.raw {root}/{stem}.log"\n'
                        '  format "raw"\n}\n')
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SPEECHD_", "XDG_", "ALSA_", "PULSE_", "ETUDE_"))}
        self.env.update(HOME=self.home, XDG_RUNTIME_DIR=self.run,
                        XDG_CONFIG_HOME=os.path.join(self.home, ".config"),
                        XDG_DATA_HOME=os.path.join(self.home, ".local", "share"))
        self.address = "unix_socket:" + self.sock
        self.cmd = ["speech-dispatcher", "-s", "-t", "0", "-C", self.conf,
                    "-c", "unix_socket", "-S", self.sock,
                    "-P", os.path.join(self.run, "speechd.pid"), "-L", self.logdir, "-l", "4"]
        self.out = open(os.path.join(root, "daemon.out"), "wb")
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.audio = DaemonLogAudio(os.path.join(self.logdir, "speech-dispatcher.log"))

    def wait_ready(self, timeout=60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            if os.path.exists(self.sock):
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0.5)
        kill_under(self.root)
        self.out.close()


def kill_under(root):
    """SIGKILL, by pid, every process of ours whose command line names this
    run's scratch folder (module pipelines run in their own process groups,
    out of reach of the daemon's)."""
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            if root in cmd and os.stat(f"/proc/{pid}").st_uid == os.getuid():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


class Events:
    """Every SSIP event of the connection with its arrival time, by message
    id (set at the connection, so that none is lost to the race between
    speak() returning and a per-message callback being registered)."""

    def __init__(self, client):
        self.cv = threading.Condition()
        self.by_msg = {}
        self.inner = client._callback_handler
        client._conn.set_callback(self)

    def __call__(self, msg_id, client_id, type, **kwargs):
        now = time.monotonic()
        with self.cv:
            self.by_msg.setdefault(msg_id, []).append((now, type))
            self.cv.notify_all()
        self.inner(msg_id, client_id, type, **kwargs)

    def wait_for(self, msg_id, types, timeout):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for ev in self.by_msg.get(msg_id, []):
                    if ev[1] in types:
                        return ev[0]
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)


# ------------------------------------------------------------------- rows ---

class Row:
    def __init__(self, key, label, daemon, module, voice, source):
        self.key, self.label, self.daemon = key, label, daemon
        self.module, self.voice, self.source = module, voice, source
        self.first, self.cancel_begin, self.cancel_audio = [], [], []
        self.errors = []

    # (monotonic, bytes) audio hand-offs at the first-audio point
    def handoffs(self):
        if self.source == "tee":
            return read_timed(os.path.join(self.daemon.root, "tee.log"))
        off = time.monotonic() - time.time()
        return [(t + off, n * 2) for t, n in self.daemon.audio.update()]

    def file_reads(self):
        return read_timed(self.daemon.gen_log if self.source == "tee"
                          else self.daemon.capture_log)


def first_after(items, t):
    return next((x for x, _ in items if x >= t), None)


def ms(x):
    return None if x is None else round(1000 * x, 1)


def one_message(row, client, events):
    t0 = time.monotonic()
    msg = int(client.speak(SENTENCE)[2][0])
    begin = events.wait_for(msg, ("begin",), 60)
    end = events.wait_for(msg, ("end", "cancel"), 120)
    time.sleep(0.3)
    first = first_after(row.handoffs(), t0)
    at_file = first_after(row.file_reads(), t0)
    r = {"begin": ms(begin - t0) if begin else None,
         "first_audio": ms(first - t0) if first else None,
         "at_file": ms(at_file - t0) if at_file else None,
         "end": ms(end - t0) if end else None}
    if end is None or first is None:
        row.errors.append(f"message: {r}")
    return r


def one_cancel(row, client, events, after):
    t0 = time.monotonic()
    msg = int(client.speak(LONG_TEXT)[2][0])
    begin = events.wait_for(msg, ("begin",), 60)
    if begin is None:
        row.errors.append("cancel: no BEGIN")
        client.cancel()
        time.sleep(2)
        return None
    anchor = begin
    if after == "audio":
        end = time.monotonic() + 60
        anchor = None
        while time.monotonic() < end and anchor is None:
            anchor = first_after(row.handoffs(), t0)
            if anchor is None:
                time.sleep(0.01)
        if anchor is None:
            row.errors.append("cancel: no audio within 60 s")
            anchor = time.monotonic()
    time.sleep(max(0.0, anchor + 0.5 - time.monotonic()))
    tc = time.monotonic()
    client.cancel()
    done = events.wait_for(msg, ("cancel", "end"), 15)
    kinds = [k for _, k in events.by_msg.get(msg, [])]
    time.sleep(1.5)
    hand = [(t, n) for t, n in row.handoffs() if t >= t0]
    reads = [(t, n) for t, n in row.file_reads() if t >= t0]
    last = max((t for t, _ in hand), default=None)
    last_read = max((t for t, _ in reads), default=None)
    rate = 44100 if row.source == "tee" else None  # bytes/s of 22.05 kHz 16-bit mono
    before = sum(n for t, n in hand if t < tc)
    r = {"to_cancel_event": ms(done - tc) if done else None,
         "ending": "cancel" if "cancel" in kinds else ("end" if "end" in kinds else None),
         "to_last_audio": ms(max(0.0, last - tc)) if last else 0.0,
         "to_last_file_write": ms(max(0.0, last_read - tc)) if last_read else 0.0,
         "audio_bytes_before_cancel": before,
         "audio_bytes_after_cancel": sum(n for t, n in hand if t >= tc),
         "audio_seen_before_cancel": before > 0}
    if rate:
        r["audio_s_before_cancel"] = round(before / rate, 2)
    if r["ending"] != "cancel":
        row.errors.append(f"cancel: {r}")
    return r


def run_row(row, runs, log):
    import speechd
    client = speechd.SSIPClient("speechd-latency", address=row.daemon.address,
                                autospawn=False)
    try:
        events = Events(client)
        client.set_output_module(row.module)
        if row.voice:
            names = [v[0] for v in client.list_synthesis_voices()]
            if row.voice not in names:
                row.errors.append(f"voice {row.voice} not listed: {names[:10]}")
            client.set_synthesis_voice(row.voice)
        log(f"[{row.key}] warm-up")
        one_message(row, client, events)
        for i in range(runs):
            r = one_message(row, client, events)
            row.first.append(r)
            log(f"[{row.key}] message {i + 1}: {r}")
        for after, store in (("begin", row.cancel_begin), ("audio", row.cancel_audio)):
            for i in range(runs):
                r = one_cancel(row, client, events, after)
                if r is not None:
                    store.append(r)
                log(f"[{row.key}] cancel {after}+0.5s {i + 1}: {r}")
                time.sleep(0.5)
    finally:
        try:
            client.close()
        except Exception:
            pass


# ---------------------------------------------------------------- summary ---

def med_max(values):
    v = [x for x in values if x is not None]
    if not v:
        return "n/a"
    return f"{statistics.median(v):.0f} / {max(v):.0f}"


def table(rows):
    out = ["| row | speak() → BEGIN | speak() → first audio | speak() → audio at file PCM "
           "| speak() → END | cancel@BEGIN+0.5s → CANCEL | → last audio write "
           "| cancel@audio+0.5s → CANCEL | → last audio write |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = r.first
        out.append(
            f"| {r.label} | {med_max(x['begin'] for x in f)} "
            f"| {med_max(x['first_audio'] for x in f)} "
            f"| {med_max(x['at_file'] for x in f)} | {med_max(x['end'] for x in f)} "
            f"| {med_max(x['to_cancel_event'] for x in r.cancel_begin)} "
            f"| {med_max(x['to_last_audio'] for x in r.cancel_begin)} "
            f"| {med_max(x['to_cancel_event'] for x in r.cancel_audio)} "
            f"| {med_max(x['to_last_audio'] for x in r.cancel_audio)} |")
    return "\n".join(out)


# ------------------------------------------------------------------- main ---

def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--reader":
        return reader_main(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 2 and sys.argv[1] == "--tee":
        return tee_main(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sd-etude", required=True)
    ap.add_argument("--piper", required=True)
    ap.add_argument("--piper-voice", required=True, help="PATH/en_US-joe-medium.onnx")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--scratch", default="/tmp/sdbench")
    ap.add_argument("--rows", default="etude-slt,etude-joe,espeak-ng,piper-generic")
    a = ap.parse_args()
    wanted = a.rows.split(",")
    sd_etude, piper, voice = (os.path.abspath(p) for p in (a.sd_etude, a.piper, a.piper_voice))
    with open(voice + ".json") as f:
        rate = json.load(f)["audio"]["sample_rate"]
    voice_name = os.path.basename(voice)[:-len(".onnx")]
    os.makedirs(a.scratch, exist_ok=True)
    run_root = os.path.join(a.scratch, time.strftime("run-%Y%m%dT%H%M%S"))
    os.makedirs(run_root)
    logf = open(os.path.join(run_root, "bench.log"), "w")

    def log(s):
        line = time.strftime("%H:%M:%S ") + s
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    setups = []  # (daemon key, modules, extra files, rows [(key,label,module,voice,source)])
    if {"etude-slt", "etude-joe"} & set(wanted):
        setups.append(("etude", [("etude", sd_etude, "{root}/etude.conf")],
                       {"etude.conf": f'DefaultVoice "slt"\nPiperVoice "{voice}"\n'
                                      'Backend "cpu"\n'},
                       [("etude-slt", "sd_etude, built-in slt", "etude", "slt", "log"),
                        ("etude-joe", f"sd_etude, Piper {voice_name}", "etude", voice_name,
                         "log")]))
    if "espeak-ng" in wanted:
        conf = "/etc/speech-dispatcher/modules/espeak-ng.conf"
        setups.append(("espeak-ng", [("espeak-ng", f"{MODULE_DIR}/sd_espeak-ng",
                                      conf if os.path.exists(conf) else "")], {},
                       [("espeak-ng", "sd_espeak-ng (Debian)", "espeak-ng", None, "log")]))
    if "piper-generic" in wanted:
        cmd = (f"printf %s \\'$DATA\\' | {piper} --model \\'{voice}\\' --output-raw "
               f"| {PY} {SELF} --tee {{root}}/tee.log "
               f"| aplay -q -D gencapture -t raw -f S16_LE -c 1 -r {rate} -")
        gconf = ("Debug 0\n"
                 f'GenericExecuteSynth "{cmd}"\n'
                 'GenericLanguage "en" "en" "utf-8"\n'
                 f'AddVoice "en" "MALE1" "{voice_name}"\n'
                 f'DefaultVoice "{voice_name}"\n')
        setups.append(("piper-generic",
                       [("piper-generic", f"{MODULE_DIR}/sd_generic",
                         "{root}/piper-generic.conf")],
                       {"piper-generic.conf": gconf},
                       [("piper-generic", f"sd_generic + piper CLI, {voice_name}",
                         "piper-generic", voice_name, "tee")]))

    rows, daemons = [], []
    deadline = threading.Timer(3000, lambda: (log("overall timeout"), kill_under(run_root),
                                              os._exit(3)))
    deadline.daemon = True
    deadline.start()
    try:
        for key, modules, files, row_specs in setups:
            specs = [s for s in row_specs if s[0] in wanted]
            root = os.path.join(run_root, key)
            os.makedirs(root)
            modules = [(n, b, c.replace("{root}", root)) for n, b, c in modules]
            files = {p: t.replace("{root}", root) for p, t in files.items()}
            d = Daemon(root, modules, files)
            daemons.append(d)
            log(f"daemon {key}: {' '.join(d.cmd)}")
            if not d.wait_ready():
                log(f"daemon {key} did not start; see {root}")
                continue
            for k, label, module, v, source in specs:
                row = Row(k, label, d, module, v, source)
                rows.append(row)
                try:
                    run_row(row, a.runs, log)
                except Exception as e:
                    row.errors.append(f"{type(e).__name__}: {e}")
                    log(f"[{k}] error {type(e).__name__}: {e}")
            d.stop()
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                d.stop()
        kill_under(run_root)
        deadline.cancel()
    result = {"sentence": SENTENCE, "runs": a.runs, "cpu_count": os.cpu_count(),
              "rows": [{"key": r.key, "label": r.label, "first": r.first,
                        "cancel_after_begin": r.cancel_begin,
                        "cancel_after_audio": r.cancel_audio, "errors": r.errors}
                       for r in rows]}
    with open(os.path.join(run_root, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    log("results: " + os.path.join(run_root, "results.json"))
    print("\nmilliseconds, median / max of %d runs\n" % a.runs)
    print(table(rows))
    for r in rows:
        for e in r.errors:
            print(f"note [{r.key}]: {e}")
    return 1 if any(r.errors for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
