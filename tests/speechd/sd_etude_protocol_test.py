#!/usr/bin/python3
"""sd_etude over pipes, as speech-dispatcher 0.11.4's server drives it.

Usage: sd_etude_protocol_test.py SD_ETUDE ETUDE

Runs the module with its standard input and output on pipes, sends the
server's command sequences and checks every reply and event: replies and
their codes, the order BEGIN, audio (705), marks (700), END/STOP/PAUSE,
the audio against `etude say --raw`, STOP latency, and that bad input
neither crashes nor hangs the module. Prints PASS/FAIL per check and exits
1 on any failure. Standard library only.
"""
import atexit
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import wave

from sd_module_client import (
    FAILURES,
    TERMINAL,
    Module,
    Timeout,
    check,
    etude_raw,
    order_ok,
    server_set,
    speak,
    startup,
)

def make_icon_folder():
    """A sound icon folder with one icon: 0.1 s of a 440 Hz tone, stereo at
    22050 Hz, the left channel at half the right's level. Returns the folder
    and the 16-bit mono samples the module should send (the channels' mean)."""
    folder = tempfile.mkdtemp(prefix="sd_etude_icons_")
    atexit.register(shutil.rmtree, folder, True)
    left = [int(8000 * math.sin(2 * math.pi * 440 * i / 22050)) for i in range(2205)]
    frames = b"".join(struct.pack("<hh", v // 2, v) for v in left)
    with wave.open(os.path.join(folder, "chime.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(frames)
    # Not icons: a FIFO (opening it would wait for a writer) and a file of
    # 9 channels (more than any icon has).
    os.mkfifo(os.path.join(folder, "fifo"))
    with wave.open(os.path.join(folder, "nine.wav"), "wb") as w:
        w.setnchannels(9)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(b"\0\0" * 9 * 100)
    return folder, [(v // 2 + v) / 2 for v in left]


def make_symbols_folder():
    """speech-dispatcher's locale folder with an English symbols.dic of a few
    lines in its format (the module reads the voice language's table)."""
    folder = tempfile.mkdtemp(prefix="sd_etude_symbols_")
    atexit.register(shutil.rmtree, folder, True)
    os.mkdir(os.path.join(folder, "en"))
    with open(os.path.join(folder, "en", "symbols.dic"), "w", encoding="utf-8") as f:
        f.write("complexSymbols:\n! sentence ending\t(?<=[^\\s!])\\!(?=[\\s]|$)\n"
                "symbols:\n! sentence ending\tbang\tall\talways\n,\tcomma\tall\talways\n"
                "%\tpercent\tsome\n\\#\tnumber\tsome\n")
    return folder


def main():
    binary, etude = sys.argv[1], sys.argv[2]
    global ICON_SAMPLES
    os.environ["ETUDE_SD_SOUND_ICONS"], ICON_SAMPLES = make_icon_folder()
    os.environ["ETUDE_SD_SYMBOLS"] = make_symbols_folder()
    m = Module(binary)
    try:
        run(m, binary, etude)
        piper_voices(binary, etude)
        configured_default(binary, etude)
    except Timeout as e:
        check("the module answers in time", False, str(e))
    finally:
        m.kill()
        if FAILURES:
            sys.stderr.write(b"".join(m.stderr[-20:]).decode(errors="replace"))
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


def stop_while_blocked(m):
    """STOP while the module's writes are blocked: the command loop must
    still take it, and 703 must follow as soon as output drains."""
    long_text = "<speak>" + " ".join(
        f"Sentence {i} of a text far longer than the pipe can hold." for i in range(300)
    ) + "</speak>"
    m.send("SPEAK\n")
    m.message()
    m.send(long_text + "\n.\n")
    m.message(60)
    m.reading.clear()
    time.sleep(1.5)  # the pipe (64 KiB) fills: the module's write blocks
    m.send("STOP\n")
    time.sleep(0.2)
    resumed = time.monotonic()
    m.reading.set()
    codes = []
    while True:
        msg = m.message(30)
        codes.append(msg[-1][:3])
        if codes[-1] in TERMINAL:
            break
    ms = 1000 * (m.last_time - resumed)
    # What was already in the pipe (or in the write under way) still comes;
    # nothing is written after the STOP was seen.
    check("STOP while output is blocked: 703 within 200 ms of reading again",
          codes[-1] == b"703" and ms <= 200 and m.quiet_for(0.3),
          f"{ms:.1f} ms, {codes.count(b'705')} audio events drained")


def piper_voices(binary, etude):
    """A configured multi-speaker Piper voice: listed with its speakers as
    variants, chosen by synthesis_voice, spoken at its own rate."""
    voice = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "piper",
                         "test_medium_multi.onnx")
    if not os.path.exists(voice):
        print("SKIP Piper voice checks (no tests/data/piper/test_medium_multi.onnx)")
        return
    global GERMAN
    folder = tempfile.mkdtemp(prefix="sd_etude_de_")
    GERMAN = os.path.join(folder, "de_DE-test-medium.onnx")
    atexit.register(shutil.rmtree, folder, True)
    os.symlink(os.path.abspath(voice), GERMAN)
    with open(voice + ".json") as f:
        config = json.load(f)
    config["language"] = {"code": "de_DE", "family": "de", "region": "DE"}
    with open(GERMAN + ".json", "w") as f:
        json.dump(config, f)
    env = dict(os.environ, ETUDE_SD_PIPER_VOICES=voice + ":" + GERMAN, ETUDE_SD_BACKEND="cpu")
    m = Module(binary, env=env)
    try:
        m.send("INIT\n")
        m.message(120)
        m.send("LIST VOICES\n")
        r = m.message(30)
        fields = [ln[4:].split(b"\t") for ln in r[:-1]]
        piper = [f for f in fields if f[0] not in (b"slt", b"rms", b"awb")
                 and not f[0].startswith(b"de_DE")]
        check("LIST VOICES: the Piper voice (en-US) and one NAME#SPEAKER line per speaker",
              len(piper) == 5 and all(f[1] == b"en-US" for f in piper)
              and [f[2] for f in piper[1:]] == [b"speaker_%d" % i for i in range(4)],
              repr(piper))
        # The filtered form speech-dispatcher 0.12 sends (LIST VOICES LANGUAGE [VARIANT]),
        # matched as its own modules match it: the language, or its region, in any case.
        listed = {}
        for request in ["en", "EN-us", "en-US speaker_2", "de", "fr", "en-GB"]:
            m.send(f"LIST VOICES {request}\n")
            listed[request] = [ln[4:].split(b"\t")[0].decode() for ln in m.message(30)]
        names = [f[0].decode() for f in fields]
        check("LIST VOICES en: every English voice, built-in (en) and Piper (en-US)",
              listed["en"][:-1] == [n for n in names if not n.startswith("de_DE")]
              and listed["en"][-1] == "OK VOICE LIST SENT", listed["en"])
        check("LIST VOICES EN-us: the en-US voices only, any case",
              listed["EN-us"][:-1] == [f[0].decode() for f in piper], listed["EN-us"])
        check("LIST VOICES en-US speaker_2: that speaker's line only",
              listed["en-US speaker_2"][:-1] == [piper[3][0].decode()], listed["en-US speaker_2"])
        check("LIST VOICES de: the de_DE voice", len(listed["de"]) > 1
              and all(n.startswith("de_DE") for n in listed["de"][:-1]), listed["de"])
        check("LIST VOICES fr and en-GB: none, 304 as speech-dispatcher's modules answer",
              listed["fr"] == listed["en-GB"] == ["CANT LIST VOICES"], (listed["fr"], listed["en-GB"]))
        if len(piper) < 3:
            return
        chosen = piper[2][0].decode()
        server_set(m, synthesis_voice=chosen)
        _, second, sp, _ = speak(m, "<speak>Hello world.</speak>")
        ref = subprocess.run([etude, "say", "--voice", voice, "--speaker", "speaker_1",
                              "--backend", "cpu", "--raw", "Hello world."], check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
        check(f"synthesis_voice={chosen}: 705 at the voice's 22050 Hz, 702, and the audio of "
              "`etude say --speaker speaker_1`",
              order_ok(sp) and sp.terminal == "702" and sp.rates == {22050}
              and sp.audio == ref, f"{len(sp.audio)} vs {len(ref)} bytes, rates {sp.rates}")
        # A message in a language the default voice (slt, en) does not
        # speak goes to a voice that does: here a German-labelled copy.
        server_set(m, language="de-AT")
        _, _, german, _ = speak(m, "<speak>Hello world.</speak>")
        ref = subprocess.run([etude, "say", "--voice", GERMAN, "--backend", "cpu", "--raw",
                              "Hello world."], check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL).stdout
        check("language=de-AT without synthesis_voice: the de_DE voice speaks it (its "
              "22050 Hz audio), not slt", german.terminal == "702" and german.rates == {22050}
              and german.audio == ref, f"rates {german.rates}")
        server_set(m, language="en-US")
        _, _, english, _ = speak(m, "<speak>Hello world.</speak>")
        check("language=en-US: the default voice, slt", english.rates == {16000}
              and english.audio == etude_raw(etude, "Hello world."))
        m.send("QUIT\n")
        m.message()
    except Timeout as e:
        check("the Piper module answers in time", False, str(e))
    finally:
        m.kill()
    # Unconfigured, the voices installed in the voice folders are offered.
    m = Module(binary, env=dict(os.environ, ETUDE_SD_BACKEND="cpu"),
               voice_path=os.path.dirname(os.path.abspath(voice)))
    try:
        m.send("INIT\n")
        m.message(120)
        m.send("LIST VOICES\n")
        names = {ln[4:].split(b"\t")[0] for ln in m.message(30)[:-1]}
        check("LIST VOICES: the voices installed in the voice folders, unconfigured",
              {b"test_medium", b"test_low", b"test_medium_multi#speaker_3"} <= names,
              repr(sorted(names)))
        m.send("QUIT\n")
        m.message()
    except Timeout as e:
        check("the module lists the installed voices in time", False, str(e))
    finally:
        m.kill()


def configured_default(binary, etude):
    """etude.conf (the path the server passes) chooses the default voice."""
    path = f"/tmp/sd_etude_test_{os.getpid()}.conf"
    with open(path, "w") as f:
        f.write('# a test configuration\nDefaultVoice "awb"\nSomeFutureKey 1\n')
    m = Module(binary, conf=path)
    try:
        m.send("INIT\n")
        m.message(120)
        server_set(m)
        text = "The configured voice."
        _, _, sp, _ = speak(m, f"<speak>{text}</speak>")
        check("etude.conf DefaultVoice awb: a message without a voice (voice=male1, as the "
              "server sends it) is spoken by awb",
              sp.terminal == "702" and sp.audio == etude_raw(etude, text, "awb"))
    except Timeout as e:
        check("the configured module answers in time", False, str(e))
    finally:
        m.kill()
        os.unlink(path)


def run(m, binary, etude):
    startup(m)

    r1, r2 = server_set(m, voice="female1", some_future_key="x")
    check("SET with every server key and an unknown one: 203 then 203 OK SETTINGS RECEIVED",
          r1 == [b"203 OK RECEIVING SETTINGS"] and r2 == [b"203 OK SETTINGS RECEIVED"],
          repr((r1, r2)))
    # What speech-dispatcher's own modules refuse (module_utils.c, module_process.c), they
    # refuse here too: a value out of range or not defined 303, a line not KEY=VALUE 302.
    for bad, code in [({"rate": "150"}, b"303"), ({"pitch": "high"}, b"303"),
                      ({"punctuation_mode": "loud"}, b"303"), ({"spelling_mode": "yes"}, b"303"),
                      ({"cap_let_recogn": "beep"}, b"303"), ({"voice": "robot"}, b"303"),
                      ({"volume": ""}, b"302")]:
        _, r = server_set(m, **{"voice": "female1", **bad})
        check(f"SET {bad}: {code.decode()}", len(r) == 1 and r[0][:3] == code, repr(r))
    m.send("SET\n")
    m.message()
    m.send("rate=0\nno equals sign\n.\n")
    r = m.message()
    check("SET with a line without '=': 302 ERROR BAD SYNTAX", r == [b"302 ERROR BAD SYNTAX"],
          repr(r))
    _, r = server_set(m, voice="female1")
    check("SET after refused ones: 203 OK SETTINGS RECEIVED", r == [b"203 OK SETTINGS RECEIVED"],
          repr(r))

    # ---- plain text: the audio equals etude say --raw ------------------------
    text = "Hello world, this is a test."
    first, second, sp, sent = speak(m, f"<speak>{text}</speak>")
    check("SPEAK: 202 then 200 OK SPEAKING",
          first[-1].startswith(b"202") and second == [b"200 OK SPEAKING"], repr((first, second)))
    check("SPEAK events: 701, 705 audio, 702 in order, well formed",
          order_ok(sp) and sp.terminal == "702" and not sp.errors and sp.audio
          and [e[0] for e in sp.events][1] == "705", repr(sp.errors[:2]))
    ref = etude_raw(etude, text)
    check("SPEAK audio equals `etude say --voice slt --raw` exactly (16-bit, 16000 Hz)",
          sp.audio == ref and sp.rates == {16000},
          f"{len(sp.audio) // 2} vs {len(ref) // 2} samples, rates {sp.rates}")
    if sp.first_audio_time:
        print(f"INFO first 705 {1000 * (sp.first_audio_time - sent):.1f} ms after the data ended")

    # ---- marks: each at the sample position where its segment ended ---------
    segs = ["Hello there.", " How are you today?", " Fine."]
    doc = (f'<speak>{segs[0]}<mark name="__spd_0"/>{segs[1]}<mark name="__spd_1"/>'
           f'{segs[2]}</speak>')
    _, second, sp, _ = speak(m, doc)
    marks = [(e[1], e[2]) for e in sp.events if e[0] == "700"]
    check("marks: 700 lines __spd_0, __spd_1 in order, then 702",
          [n for n, _ in marks] == ["__spd_0", "__spd_1"] and sp.terminal == "702"
          and order_ok(sp) and not sp.errors, repr(marks))
    seg_bytes = [len(etude_raw(etude, s.strip())) for s in segs]
    want = [seg_bytes[0], seg_bytes[0] + seg_bytes[1]]
    check("marks: each at the audio position where its segment's audio ends "
          "(sum of the 705 samples before it = etude say of the segments before it)",
          [p for _, p in marks] == want and len(sp.audio) == sum(seg_bytes),
          f"positions {[p // 2 for _, p in marks]} want {[w // 2 for w in want]}, "
          f"total {len(sp.audio) // 2} want {sum(seg_bytes) // 2}")

    # ---- STOP mid-speech --------------------------------------------------------
    long_text = "<speak>" + " ".join(
        f"This is sentence number {i} of a long text that keeps going." for i in range(200)
    ) + "</speak>"
    server_set(m)
    m.send("SPEAK\n")
    m.message()
    m.send(long_text + "\n.\n")
    check("long SPEAK: 200 OK SPEAKING", m.message(60) == [b"200 OK SPEAKING"])
    kinds, stop_sent, t703, after, voice_list = [], None, None, [], None
    while True:
        msg = m.message(60)
        code = msg[-1][:3]
        if t703 is not None:
            after.append(code)
        if code == b"200":
            voice_list = msg  # the reply to LIST VOICES, among the events
            continue
        kinds.append(code)
        if code == b"705" and len(kinds) == 2:
            m.send("LIST VOICES\n")  # the server may ask while a message plays
        if code == b"705" and stop_sent is None and kinds.count(b"705") >= 3:
            # Timed from before the write: the reader thread may stamp the
            # 703 before this thread runs again after the write returns (a
            # loaded machine measured -0.0 ms when it was timed after).
            stop_sent = time.monotonic()
            m.send("STOP\n")
        if code in TERMINAL:
            t703 = m.last_time
            break
    ms = 1000 * (t703 - stop_sent) if stop_sent else -1
    quiet = m.quiet_for(0.5)
    check("STOP mid-speech: 703 STOP, the only ending, and nothing after it",
          kinds[-1] == b"703" and kinds[0] == b"701" and sum(k in TERMINAL for k in kinds) == 1
          and quiet, f"ending {kinds[-1]!r}, quiet {quiet}")
    check("STOP mid-speech: 703 within 200 ms", 0 <= ms <= 200, f"{ms:.1f} ms")
    check("LIST VOICES while speaking: its reply arrives whole among the events",
          voice_list is not None and voice_list[-1] == b"200 OK VOICE LIST SENT"
          and all(ln.startswith(b"200-") for ln in voice_list[:-1]), repr(voice_list))
    print(f"INFO STOP to 703: {ms:.1f} ms")
    m.send("STOP\n")  # idle: no event at all
    check("STOP while idle: no reply or event", m.quiet_for(0.3))

    # ---- PAUSE: 704 at the next __spd_ mark ----------------------------------
    doc = ('<speak>First sentence here.<mark name="__spd_0"/> Second sentence here.'
           '<mark name="__spd_1"/> Third.</speak>')
    _, _, sp, _ = speak(m, doc, after_200=lambda: m.send("PAUSE\n"))
    kinds = [e[0] for e in sp.events]
    check("PAUSE: 700 __spd_0 then 704 PAUSE, no later mark or 702",
          order_ok(sp) and sp.terminal == "704" and kinds[-2] == "700"
          and [e[1] for e in sp.events if e[0] == "700"] == ["__spd_0"], repr(kinds[-3:]))

    # ---- SPEAK while a message is spoken: 301, and that message goes on -------
    # (module_process.c answers 301 while its module speaks; no event may come
    # between a command and its reply, so the message is not stopped for it.)
    m.send("SPEAK\n")
    m.message()
    m.send(long_text + "\n.\n")
    check("long SPEAK again: 200 OK SPEAKING", m.message(60) == [b"200 OK SPEAKING"])
    codes = []
    while True:
        code = m.message(60)[-1][:3]
        codes.append(code)
        if code == b"705" and codes.count(b"705") == 1:
            m.send("SPEAK\n")
            m.send("Not now.\n.\n")
        if code == b"301":
            m.send("STOP\n")
        if code in TERMINAL:
            break
    replies = [c for c in codes if c != b"705"]
    check("SPEAK while speaking: 202 then 301 ERROR CANT SPEAK, then only the first message's "
          "ending (703 for the STOP after it)",
          b"202" in replies and b"301" in replies and replies.index(b"202") < replies.index(b"301")
          and replies[-1] == b"703" and replies.count(b"703") == 1
          and b"200" not in replies, repr(replies))

    # ---- marks the 700 line cannot carry as they are ---------------------------
    long_name = "a-client-mark-" + "x" * 70
    doc = (f'<speak>Hello there.<mark name="line&#10;break"/> How are you?'
           f'<mark name="{long_name}"/> Fine.</speak>')
    _, _, sp, _ = speak(m, doc)
    names = [e[1] for e in sp.events if e[0] == "700"]
    check("a mark with a line break is one 700 line (a space for it); a name over 63 bytes "
          "is reported whole", names == ["line break", long_name] and sp.terminal == "702"
          and order_ok(sp) and not sp.errors, repr(names))

    # ---- 1,000 SPEAK/STOP pairs -----------------------------------------------
    start = time.monotonic()
    bad, endings = 0, {"702": 0, "703": 0, "704": 0}
    for i in range(1000):
        if time.monotonic() - start > 150:
            break
        # Half are stopped at once, half after their BEGIN (while audio is made).
        stop = lambda: m.send("STOP\n")
        _, second, sp, _ = speak(m, f"<speak>Quick message {i}.</speak>", timeout=20,
                                 after_200=stop if i % 2 == 0 else None,
                                 after_first=stop if i % 2 else None)
        if second != [b"200 OK SPEAKING"] or not order_ok(sp) or sp.errors:
            bad += 1
        elif sp.terminal:
            endings[sp.terminal] += 1
    took = time.monotonic() - start
    check("1000 SPEAK/STOP pairs: each 200 then 701 .. exactly one 702/703, within 150 s",
          bad == 0 and endings["702"] + endings["703"] == 1000 and endings["704"] == 0,
          f"{bad} bad, endings {endings}, {took:.1f} s")
    check("after the pairs, nothing stray arrives", m.quiet_for(0.3))

    # ---- bad commands --------------------------------------------------------
    m.send("FROBNICATE\n")
    r = m.message()
    check("unknown command: 300 ERR UNKNOWN COMMAND", r == [b"300 ERR UNKNOWN COMMAND"], repr(r))
    m.send(b"\xff\xfe\x00garbage \x01\n")
    r = m.message()
    check("a line of binary garbage: an error reply (3xx)", r[-1][:1] == b"3", repr(r))
    m.send("\n")
    r = m.message()
    check("an empty line: an error reply (3xx)", r[-1][:1] == b"3", repr(r))
    m.send("SPEAK\n")
    m.message()
    m.send(".\n")
    r = m.message()
    check("SPEAK of nothing: 301 ERROR CANT SPEAK", r == [b"301 ERROR CANT SPEAK"], repr(r))
    m.send("CHAR\n")
    m.message()
    m.send("a\nb\n.\n")
    r = m.message()
    check("CHAR of two lines: 305", r[-1][:3] == b"305", repr(r))
    m.send("LIST VOICES\n")
    r = m.message()
    check("still serving after bad input (LIST VOICES)", r[-1] == b"200 OK VOICE LIST SENT")

    # ---- CHAR, KEY, SOUND_ICON ---------------------------------------------------
    for command, data in (("CHAR", "a"), ("CHAR", "space"), ("KEY", "shift_a"),
                          ("SOUND_ICON", "message")):
        _, second, sp, _ = speak(m, data, command=command)
        check(f"{command} {data}: 200, 701 .. 702",
              second == [b"200 OK SPEAKING"] and order_ok(sp) and sp.terminal == "702",
              repr([e[0] for e in sp.events][:3]))

    # cap_let_recogn=spell: a capital spoken alone is announced.
    server_set(m, voice="female1", cap_let_recogn="spell")
    _, _, sp, _ = speak(m, "A", command="CHAR")
    check("cap_let_recogn=spell: CHAR A says 'capital A' (= etude say)",
          sp.terminal == "702" and sp.audio == etude_raw(etude, "capital A"))
    server_set(m, voice="female1", cap_let_recogn="spell", spelling_mode="on")
    _, _, sp, _ = speak(m, "<speak>Hi</speak>")
    check("cap_let_recogn=spell with spelling_mode=on: 'Hi' is 'capital H i'",
          sp.terminal == "702" and sp.audio == etude_raw(etude, "capital H i"))
    # cap_let_recogn=icon: a 40 ms 1.5 kHz cue, then the letter as it is.
    server_set(m, voice="female1", cap_let_recogn="icon")
    _, _, sp, _ = speak(m, "A", command="CHAR")
    plain = etude_raw(etude, "A")
    head = sp.audio[:len(sp.audio) - len(plain)]
    cue = struct.unpack("<%dh" % (len(head) // 2), head)
    crossings = sum(1 for a, b in zip(cue, cue[1:]) if (a < 0) != (b < 0))
    check("cap_let_recogn=icon: CHAR A is a 40 ms 1.5 kHz cue, then 'A' (= etude say)",
          sp.terminal == "702" and sp.audio.endswith(plain) and len(cue) == 640
          and 110 <= crossings <= 130 and 3000 <= max(cue) <= 3300, f"{len(cue)} samples, "
          f"{crossings} zero crossings, peak {max(cue) if cue else 0}")
    _, _, sp, _ = speak(m, "a", command="CHAR")
    check("cap_let_recogn=icon: CHAR a has no cue", sp.audio == etude_raw(etude, "a"))
    server_set(m, voice="female1")

    # Punctuation: the server sends a mode other than none only when it left
    # the symbols to the module, which reads the voice language's table.
    for mode, said in (("all", "Yes comma, 50 percent off bang!"), ("some", "Yes, 50 percent off!"),
                       ("none", "Yes, 50% off!")):
        server_set(m, voice="female1", punctuation_mode=mode)
        _, _, sp, _ = speak(m, "<speak>Yes, 50% off!</speak>")
        check(f"punctuation_mode={mode}: 'Yes, 50% off!' is '{said}' (= etude say)",
              sp.terminal == "702" and sp.audio == etude_raw(etude, said))
    server_set(m, voice="female1")
    _, _, sp, _ = speak(m, "#", command="CHAR")
    check("CHAR # (not described by the server): 'number' (= etude say)",
          sp.terminal == "702" and sp.audio == etude_raw(etude, "number"))

    # An icon with its file is that file's audio, mixed to mono, at its own
    # rate; one without is spoken by name, as the espeak-ng module does.
    _, _, sp, _ = speak(m, "chime.wav", command="SOUND_ICON")
    got = struct.unpack("<%dh" % (len(sp.audio) // 2), sp.audio)
    check("SOUND_ICON chime.wav: the file's audio (stereo mixed to mono) at its 22050 Hz",
          sp.terminal == "702" and sp.rates == {22050} and len(got) == len(ICON_SAMPLES)
          and max(abs(a - b) for a, b in zip(got, ICON_SAMPLES)) <= 1,
          f"{len(got)} samples at {sp.rates}")
    _, _, sp, _ = speak(m, "new-message", command="SOUND_ICON")
    check("SOUND_ICON with no file: its name spoken (= etude say 'new message')",
          sp.terminal == "702" and sp.audio == etude_raw(etude, "new message"))
    for name in ("fifo", "nine.wav"):
        _, _, sp, _ = speak(m, name, command="SOUND_ICON", timeout=10)
        check(f"SOUND_ICON {name} (not an icon file): spoken at once, 702",
              sp.terminal == "702" and sp.rates == {16000} and len(sp.audio) > 0)
    _, _, sp, _ = speak(m, "../chime.wav", command="SOUND_ICON")
    check("SOUND_ICON ../chime.wav (not a file name): spoken, not read",
          sp.terminal == "702" and sp.rates == {16000} and len(sp.audio) > 0)

    # ---- invalid UTF-8 ----------------------------------------------------------
    # Refused whole, with the engine's words in the log (what and where:
    # engine/utf8.h), as `etude say` and Stream::push_ssml refuse it; the
    # module goes on with the next message.
    for command, data, logged in (
            ("SPEAK", b"<speak>Broken \xff\xfe bytes.</speak>",
             b"at byte offset 14: a byte that UTF-8 never uses"),
            ("SPEAK", b"<speak>Slash \xc0\xaf here.</speak>",
             b"at byte offset 13: an overlong form"),
            ("SPEAK", b"<speak>Half \xed\xa0\x80 a pair.</speak>",
             b"at byte offset 12: a UTF-16 surrogate"),
            ("SPEAK", b"<speak>Caf\xc3( here.</speak>",
             b"at byte offset 10: a character cut short"),
            ("CHAR", b"\xe2\x82", b"at byte offset 0: the text ends inside a character")):
        m.send(command + "\n")
        m.message()
        m.send(data + b"\n.\n")
        r = m.message()
        line = b"sd_etude: message not spoken: text is not valid UTF-8 (" + logged + b")\n"
        deadline = time.monotonic() + 5
        while line not in m.stderr and time.monotonic() < deadline:
            time.sleep(0.05)  # the log line is written before the reply; read apart
        check(f"invalid UTF-8 in {command} ({logged.decode()}): 301 ERROR CANT SPEAK, "
              "the engine's words in the log", r == [b"301 ERROR CANT SPEAK"]
              and line in m.stderr and m.quiet_for(0.3), repr(r))
    _, second, sp, _ = speak(m, "<speak>Still here.</speak>")
    check("after invalid UTF-8, the next SPEAK is spoken (200, 701, audio, 702)",
          second == [b"200 OK SPEAKING"] and order_ok(sp) and sp.terminal == "702"
          and len(sp.audio) > 0)

    # ---- SSML that is not well formed -------------------------------------------
    _, second, sp, _ = speak(
        m, "<speak><prosody rate='fast'>Hello <foo bar='1'>unknown element</speak>")
    check("SSML with unclosed tags and unknown elements: spoken, 702",
          second == [b"200 OK SPEAKING"] and order_ok(sp) and sp.terminal == "702"
          and len(sp.audio) > 0)
    _, second, sp, _ = speak(
        m, 'resumed text.</prosody><mark name="__spd_3"/> Next &amp; last.</speak>')
    check("a resumed fragment (unbalanced close tags): its mark and 702",
          [e[1] for e in sp.events if e[0] == "700"] == ["__spd_3"] and sp.terminal == "702"
          and len(sp.audio) > 0)
    _, _, sp, _ = speak(m, "<speak>Wait<break time='300ms'/>now.</speak>")
    check("<break time='300ms'/> adds at least 300 ms of audio", order_ok(sp)
          and len(sp.audio) // 2 >= len(etude_raw(etude, "Wait")) // 2 + 4800)

    # ---- a 1 MB message: no hang, STOP works ---------------------------------
    big = "<speak>" + ("A long message goes on and on. " * 34000) + "</speak>"
    m.send("SPEAK\n")
    m.message()
    t = time.monotonic()
    m.send(big + "\n.\n")
    r = m.message(60)
    check(f"1 MB SPEAK ({len(big)} bytes): 200 OK SPEAKING", r == [b"200 OK SPEAKING"],
          f"{1000 * (time.monotonic() - t):.0f} ms")
    n705, stop_sent = 0, None
    while True:
        msg = m.message(60)
        code = msg[-1][:3]
        if code == b"705":
            n705 += 1
            if n705 == 2:
                stop_sent = time.monotonic()  # before the write, as above
                m.send("STOP\n")
        if code in TERMINAL:
            break
    ms = 1000 * (m.last_time - stop_sent) if stop_sent else -1
    check("1 MB SPEAK: audio flows, STOP gives 703 within 200 ms",
          code == b"703" and 0 <= ms <= 200, f"{ms:.1f} ms")

    # ---- rate and volume change the audio -------------------------------------
    server_set(m, rate="100", volume="-50")
    _, _, fast, _ = speak(m, f"<speak>{text}</speak>")
    server_set(m, voice="male3")
    _, _, male, _ = speak(m, f"<speak>{text}</speak>")
    check("rate=100 speaks faster (shorter audio) than rate=0",
          0 < len(fast.audio) < 0.6 * len(ref), f"{len(fast.audio)} vs {len(ref)} bytes")
    check("voice=male3 speaks with rms (= etude say --voice rms)",
          male.audio == etude_raw(etude, text, "rms"))
    # male1 is the server's default voice type, sent for a client that chose none: the
    # default voice (slt here).
    server_set(m, voice="male1")
    _, _, unset, _ = speak(m, f"<speak>{text}</speak>")
    check("voice=male1 (the server's default) speaks with the default voice, slt",
          unset.audio == etude_raw(etude, text, "slt"))

    # ---- pitch and SSML prosody: what the engine's <prosody> makes ----------
    server_set(m, voice="female1", pitch="100")
    _, _, high, _ = speak(m, f"<speak>{text}</speak>")
    want = etude_raw(etude, f"<speak><prosody pitch='+100%'>{text}</prosody></speak>", ssml=True)
    check("pitch=100: a built-in voice an octave up (= etude say --ssml <prosody pitch='+100%'>)",
          high.terminal == "702" and high.audio == want and high.audio != ref
          and len(high.audio) == len(ref), f"{len(high.audio)} vs {len(want)} bytes")
    server_set(m, voice="female1", pitch_range="100")
    _, _, wide, _ = speak(m, f"<speak>{text}</speak>")
    want = etude_raw(etude, f"<speak><prosody range='+100%'>{text}</prosody></speak>", ssml=True)
    check("pitch_range=100: a built-in voice's F0 spread doubled (= <prosody range='+100%'>)",
          wide.terminal == "702" and wide.audio == want and wide.audio != ref)
    server_set(m, voice="female1")
    doc = f"<speak>Soft <prosody volume='soft' rate='slow'>{text}</prosody> loud again.</speak>"
    _, _, soft, _ = speak(m, doc)
    check("<prosody volume rate> in a message: the audio of etude say --ssml of it",
          soft.terminal == "702" and soft.audio == etude_raw(etude, doc, ssml=True),
          f"{len(soft.audio)} bytes")

    stop_while_blocked(m)

    # ---- QUIT -----------------------------------------------------------------
    m.send("QUIT\n")
    r = m.message()
    try:
        code = m.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        code = None
    check("QUIT: 210 OK QUIT and exit status 0", r == [b"210 OK QUIT"] and code == 0,
          f"{r!r}, exit {code}")


if __name__ == "__main__":
    sys.exit(main())
