#!/usr/bin/env python3
"""etude serve --http against the real `openai` client (PyPI), pointed at our base URL.

Each response_format decodes (soundfile; aac: FAAD2's libfaad) to the offline render
(`etude say --raw`) at the documented rate: pcm, mp3, opus and aac at 24 kHz, wav and flac
at the voice's own; pcm, wav and flac exactly, mp3, opus and aac within their codec's error
(see CODEC_BOUNDS). A streamed
reply delivers its first bytes long before the audio is complete; speed 1.25 on a Piper
voice is `etude say --length-scale 0.8` of it; a wrong or missing key gets 401 in OpenAI's
error shape; models.list() lists the voices; stream_format "sse" carries the same bytes in
OpenAI's speech events; a voice object {"id": NAME} names a voice.

Usage: openai_client_test.py ETUDE PIPER_VOICE.onnx|-. Exit 77 (skip) without openai,
soundfile or numpy; "-" (no Piper voice: a build without espeak-ng) leaves out speed.
"""
import ctypes
import ctypes.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

try:
    import numpy as np
    import openai
    import soundfile
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (tests/python-requirements.txt)")
    sys.exit(77)

ETUDE, PIPER_VOICE = sys.argv[1], sys.argv[2]
PIPER_NAME = os.path.basename(PIPER_VOICE).removesuffix(".onnx") if PIPER_VOICE != "-" else None
TEXT = "Your timer for ten minutes has started. The front door is locked!"
KEY = "sk-etude-test-0123456789abcdef"
# Whether this build makes aac (tests/CMakeLists.txt passes what the build found), and
# whether FAAD2's library is here to decode it (libfaad-dev; without it aac is not decoded).
AAC = os.environ.get("ETUDE_TEST_AAC", "1") == "1"
FAAD = ctypes.util.find_library("faad")

# Codec error bounds. Measured on TEXT with the slt voice at 24 kHz (LAME at a constant
# 80 kbit/s and libopus at its default rate, both through libsndfile; FFmpeg 5.1's AAC
# encoder at 64 kbit/s, decoded by FAAD2 2.10): SNR 26.0 dB (mp3), 19.0 dB (opus), 33.3 dB
# (aac); envelope within 0.64 dB (mp3), 3.25 dB (opus), 0.18 dB (aac). What the bounds must
# catch measures far lower: a piece of 4096 samples dropped from the middle leaves 1.1 dB,
# another voice (rms) -1.0 dB; a wrong rate is caught by the rate and the length.
# - snr: signal-to-error ratio in dB after aligning by the codec's delay (MP3 has one:
#   LAME's placeholder frame and its encoder delay, 1681 samples here; Opus none; AAC's
#   1024 samples FAAD2 drops with its first frame's output).
# - envelope: the largest difference in dB between the mean log spectra (375 Hz bands,
#   32 ms frames, the whole reply) in the bands that hold the voice (within 40 dB of the
#   loudest; slt is a 16 kHz voice, nothing above 8 kHz): the spectral envelope a listener
#   hears.
CODEC_BOUNDS = {"mp3": {"snr": 20.0, "envelope": 2.0},
                "opus": {"snr": 12.0, "envelope": 6.0},
                "aac": {"snr": 20.0, "envelope": 2.0}}

from pass_fail import check, failures  # noqa: E402  (PASS/FAIL lines)


_renders = {}


def offline(voice, *options):
    """`etude say --raw` as int16 samples."""
    key = (voice,) + options
    if key not in _renders:
        raw = subprocess.run([ETUDE, "say", "--voice", voice, *options, "--raw", TEXT],
                             check=True, capture_output=True).stdout
        _renders[key] = np.frombuffer(raw, dtype="<i2")
    return _renders[key]


def decode(data):
    """(int16 samples, rate) of a whole reply through libsndfile."""
    # A streamed FLAC says "length unknown", which libsndfile reports as the largest
    # length there is, and it cannot seek: SoundFile.read() allocates that length and
    # seeks after each read. So read it as a stream, through libsndfile's own sf_read_short.
    with soundfile.SoundFile(io.BytesIO(data)) as f:
        blocks = []
        while True:
            block = np.empty(65536, dtype=np.int16)
            n = soundfile._snd.sf_read_short(
                f._file, soundfile._ffi.cast("short *", block.ctypes.data), len(block))
            if n <= 0:
                break
            blocks.append(block[:n])
        return np.concatenate(blocks), f.samplerate


class _FaadConfig(ctypes.Structure):
    _fields_ = [("defObjectType", ctypes.c_ubyte), ("defSampleRate", ctypes.c_ulong),
                ("outputFormat", ctypes.c_ubyte), ("downMatrix", ctypes.c_ubyte),
                ("useOldADTSFormat", ctypes.c_ubyte), ("dontUpSampleImplicitSBR", ctypes.c_ubyte)]


class _FaadFrame(ctypes.Structure):
    _fields_ = [("bytesconsumed", ctypes.c_ulong), ("samples", ctypes.c_ulong),
                ("channels", ctypes.c_ubyte), ("error", ctypes.c_ubyte),
                ("samplerate", ctypes.c_ulong), ("sbr", ctypes.c_ubyte),
                ("object_type", ctypes.c_ubyte), ("header_type", ctypes.c_ubyte),
                ("num_front_channels", ctypes.c_ubyte), ("num_side_channels", ctypes.c_ubyte),
                ("num_back_channels", ctypes.c_ubyte), ("num_lfe_channels", ctypes.c_ubyte),
                ("channel_position", ctypes.c_ubyte * 64), ("ps", ctypes.c_ubyte)]


def decode_aac(data):
    """(int16 samples, rate) of an ADTS stream through FAAD2 (libfaad, neaacdec.h), another
    decoder than the FFmpeg that encoded it. FAAD2 cannot tell plain AAC-LC from HE-AAC with
    implicit SBR and PS, so by default it doubles a low rate and plays mono as two channels
    (its `faad` program does): told not to upsample, its first channel is taken."""
    faad = ctypes.CDLL(FAAD)
    faad.NeAACDecOpen.restype = ctypes.c_void_p
    faad.NeAACDecGetCurrentConfiguration.restype = ctypes.POINTER(_FaadConfig)
    faad.NeAACDecGetCurrentConfiguration.argtypes = [ctypes.c_void_p]
    faad.NeAACDecSetConfiguration.argtypes = [ctypes.c_void_p, ctypes.POINTER(_FaadConfig)]
    faad.NeAACDecInit.restype = ctypes.c_long
    faad.NeAACDecInit.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong,
                                  ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_ubyte)]
    faad.NeAACDecDecode.restype = ctypes.POINTER(ctypes.c_short)
    faad.NeAACDecDecode.argtypes = [ctypes.c_void_p, ctypes.POINTER(_FaadFrame), ctypes.c_char_p,
                                    ctypes.c_ulong]
    faad.NeAACDecClose.argtypes = [ctypes.c_void_p]
    dec = faad.NeAACDecOpen()
    config = faad.NeAACDecGetCurrentConfiguration(dec)
    config.contents.outputFormat = 1  # FAAD_FMT_16BIT
    config.contents.dontUpSampleImplicitSBR = 1
    faad.NeAACDecSetConfiguration(dec, config)
    rate, channels = ctypes.c_ulong(0), ctypes.c_ubyte(0)
    buf = bytes(data)
    at = faad.NeAACDecInit(dec, buf, len(buf), ctypes.byref(rate), ctypes.byref(channels))
    assert at >= 0, "FAAD2 could not read the first ADTS header"
    out = []
    while at < len(buf):
        info = _FaadFrame()
        pcm = faad.NeAACDecDecode(dec, ctypes.byref(info), buf[at:], len(buf) - at)
        assert info.error == 0, f"FAAD2 error {info.error} at byte {at}"
        if info.bytesconsumed == 0:
            break
        if info.samples:
            frame = np.ctypeslib.as_array(pcm, shape=(info.samples,)).copy()
            out.append(frame[::max(info.channels, 1)])
        at += info.bytesconsumed
    faad.NeAACDecClose(dec)
    return (np.concatenate(out) if out else np.zeros(0, np.int16)), rate.value


def aligned_snr(ref, got, max_lag=3000):
    """Signal-to-error ratio in dB at the codec delay (0..max_lag samples) that is best."""
    ref = ref.astype(np.float64)
    got = got.astype(np.float64)
    n = len(ref)
    padded = np.concatenate([got, np.zeros(n + max_lag)])
    signal = np.sum(ref * ref)
    best, best_lag = -1e9, 0
    for lag in range(max_lag + 1):
        err = np.sum((padded[lag:lag + n] - ref) ** 2)
        snr = 10 * np.log10(signal / max(err, 1e-9))
        if snr > best:
            best, best_lag = snr, lag
    return best, best_lag


def log_spectrum(x, rate):
    """Mean power per 375 Hz band up to 12 kHz, in dB, over 32 ms frames."""
    x = x.astype(np.float64) / 32768.0
    frame = int(rate * 0.032)
    frames = np.lib.stride_tricks.sliding_window_view(x, frame)[::frame // 2]
    power = np.mean(np.abs(np.fft.rfft(frames * np.hanning(frame), axis=1)) ** 2, axis=0)
    freqs = np.fft.rfftfreq(frame, 1.0 / rate)
    edges = np.arange(0, 12000 + 1, 375)
    bands = [power[(freqs >= lo) & (freqs < hi)].mean() for lo, hi in zip(edges, edges[1:])]
    return 10 * np.log10(np.array(bands) + 1e-12)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        key_file = os.path.join(tmp, "key")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        voices = ["--voice", "slt"] + (["--voice", PIPER_VOICE] if PIPER_NAME else [])
        proc = subprocess.Popen([ETUDE, "serve", "--http", "127.0.0.1:0", "--api-key-file",
                                 key_file, *voices],
                                stderr=subprocess.PIPE, text=True)
        try:
            run(proc)
        finally:
            t0 = time.monotonic()
            proc.terminate()
            rc = proc.wait(timeout=30)
            stopped_in = time.monotonic() - t0
        # Idle kept-alive connections (the clients above keep theirs) end within
        # cpp-httplib's keep-alive timeout, 5 s.
        check("server exits 0 on SIGTERM, within 10 s", rc == 0 and stopped_in < 10,
              (rc, f"{stopped_in:.1f} s"))
    if failures:
        sys.exit(1)


def run(proc):
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert m, line
    check("the start line says a key is required", "API key required" in line, line)
    log = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    base = f"http://127.0.0.1:{m.group(1)}/v1"
    client = openai.OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=120)

    # Every format, decoded, against the offline render at the documented rate.
    formats = [("pcm", 24000, True), ("wav", 16000, True), ("flac", 16000, True),
               ("mp3", 24000, False), ("opus", 24000, False)]
    if AAC and FAAD:
        formats.append(("aac", 24000, False))
    elif AAC:
        print("     aac: not decoded (no FAAD2 library: apt-get install libfaad-dev)")
    for fmt, rate, exact in formats:
        reply = client.audio.speech.create(model="tts-1", voice="slt", input=TEXT,
                                           response_format=fmt)
        data = reply.content
        ref = offline("slt", "--rate", str(rate))
        if fmt == "pcm":
            got, got_rate = np.frombuffer(data, dtype="<i2"), 24000
        elif fmt == "aac":
            got, got_rate = decode_aac(data)
        else:
            got, got_rate = decode(data)
        check(f"{fmt}: decodes at {rate} Hz", got_rate == rate, got_rate)
        if exact:
            check(f"{fmt}: equals `etude say --rate {rate} --raw`", np.array_equal(got, ref),
                  (len(got), len(ref)))
            continue
        snr, lag = aligned_snr(ref, got)
        ref_bands = log_spectrum(ref, rate)
        voiced = ref_bands > ref_bands.max() - 40
        envelope = np.max(np.abs(log_spectrum(got, rate) - ref_bands)[voiced])
        bound = CODEC_BOUNDS[fmt]
        print(f"     {fmt}: {len(data)} bytes, {len(got)} samples for {len(ref)}, delay {lag}, "
              f"SNR {snr:.1f} dB, envelope within {envelope:.2f} dB")
        check(f"{fmt}: the offline render within the codec's error (SNR > {bound['snr']} dB)",
              snr > bound["snr"], f"{snr:.1f} dB")
        check(f"{fmt}: spectral envelope within {bound['envelope']} dB",
              envelope < bound["envelope"], f"{envelope:.2f} dB")
        check(f"{fmt}: as long as the render (within the codec's padding)",
              len(ref) <= len(got) + lag <= len(ref) + 4800, (len(got), lag, len(ref)))

    # No response_format: mp3, as in the contract.
    data = client.audio.speech.create(model="tts-1", voice="slt", input=TEXT).content
    check("no response_format gives mp3", data[:3] == b"ID3" or (data[0] == 0xFF and data[1] >= 0xE0),
          data[:4])

    # The extension: another rate.
    data = client.audio.speech.create(model="tts-1", voice="slt", input=TEXT,
                                      response_format="pcm", extra_body={"sample_rate": 48000}).content
    check("pcm with sample_rate 48000 equals `etude say --rate 48000 --raw`",
          np.array_equal(np.frombuffer(data, dtype="<i2"), offline("slt", "--rate", "48000")))

    # stream_format "sse": the same bytes, Base64 in speech.audio.delta events, then one
    # speech.audio.done with its usage (OpenAI's speech stream events).
    req = urllib.request.Request(
        f"{base}/audio/speech", method="POST",
        data=json.dumps({"model": "gpt-4o-mini-tts", "voice": "slt", "input": TEXT,
                         "response_format": "pcm", "stream_format": "sse"}).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        content_type, body = r.headers.get("Content-Type", ""), r.read().decode()
    events = [json.loads(block[len("data: "):]) for block in body.split("\n\n")
              if block.startswith("data: ")]
    deltas = [e for e in events if e.get("type") == "speech.audio.delta"]
    check("sse: text/event-stream", content_type.startswith("text/event-stream"), content_type)
    check("sse: every block is one data line, the last speech.audio.done with its usage",
          body.endswith("\n\n") and len(events) == body.count("\n\n") and len(deltas) > 1
          and events[-1].get("type") == "speech.audio.done"
          and set(events[-1].get("usage", {})) == {"input_tokens", "output_tokens", "total_tokens"}
          and len(deltas) == len(events) - 1, body[-300:])
    import base64
    pcm = b"".join(base64.b64decode(e["audio"], validate=True) for e in deltas)
    check("sse: the deltas' audio equals `etude say --rate 24000 --raw`",
          np.array_equal(np.frombuffer(pcm, dtype="<i2"), offline("slt", "--rate", "24000")),
          len(pcm))

    # A voice given as an object by its id (OpenAI's custom voices).
    data = client.audio.speech.create(model="tts-1", voice={"id": "slt"}, input=TEXT,
                                      response_format="pcm").content
    check("voice {\"id\": \"slt\"} speaks as voice \"slt\"",
          np.array_equal(np.frombuffer(data, dtype="<i2"), offline("slt", "--rate", "24000")))

    # Streaming: bytes come while the audio is still being made.
    # Each request's text has a length of its own, so its log line (written
    # when the reply is complete) is told from the previous request's, which
    # the reader thread may take in late.
    for extra, fmt in enumerate(["pcm", "mp3"]):
        long_text = " ".join([TEXT] * 12) + " Again." * (extra + 1)
        own_line = f"chars={len(long_text)} "
        t0 = time.monotonic()
        first, total, logged_at_first = None, 0, None
        with client.with_streaming_response.audio.speech.create(
                model="tts-1", voice="slt", input=long_text, response_format=fmt) as resp:
            for chunk in resp.iter_bytes(1024):
                if first is None:
                    first = time.monotonic() - t0
                    logged_at_first = any(own_line in line for line in list(log))
                total += len(chunk)
        whole = time.monotonic() - t0
        print(f"     streamed {fmt}: first bytes after {first * 1000:.0f} ms, all {total} bytes "
              f"after {whole * 1000:.0f} ms")
        check(f"streamed {fmt}: first bytes before the reply was complete",
              first is not None and not logged_at_first and first < whole / 3,
              (first, whole, logged_at_first))

    # speed 1.25 on a Piper voice is `etude say --length-scale 0.8` (its config says 1).
    for speed, scale in [(1.25, "0.8"), (0.5, "2")] if PIPER_NAME else []:
        data = client.audio.speech.create(model="tts-1", voice=PIPER_NAME, input=TEXT,
                                          response_format="wav", speed=speed).content
        got = np.frombuffer(data[44:], dtype="<i2")
        ref = offline(PIPER_VOICE, "--length-scale", scale)
        check(f"speed {speed} equals `etude say --length-scale {scale} --raw`",
              np.array_equal(got, ref), (len(got), len(ref)))
    # The same on a built-in voice, whose pace is Flite's duration stretch.
    for speed, scale in [(1.25, "0.8"), (0.5, "2")]:
        data = client.audio.speech.create(model="tts-1", voice="slt", input=TEXT,
                                          response_format="wav", speed=speed).content
        got = np.frombuffer(data[44:], dtype="<i2")
        ref = offline("slt", "--length-scale", scale)
        check(f"slt: speed {speed} equals `etude say --voice slt --length-scale {scale} --raw`",
              np.array_equal(got, ref) and len(got) > 0, (len(got), len(ref)))
    if PIPER_NAME:
        plain = offline(PIPER_VOICE)
        check("speed 1.25 is shorter than speed 1.0",
              len(offline(PIPER_VOICE, "--length-scale", "0.8")) < len(plain), len(plain))
    else:
        print("SKIP speed on a Piper voice: no Piper voice (a build without espeak-ng)")

    # Refusals, in OpenAI's error shape.
    for name, kwargs, param in [
            ("aiff", {"response_format": "aiff"}, "response_format"),
            ("speed 5", {"speed": 5.0}, "speed"),
            ("opus at 22050 Hz", {"response_format": "opus", "extra_body": {"sample_rate": 22050}},
             "sample_rate"),
            ("stream_format xml", {"extra_body": {"stream_format": "xml"}}, "stream_format"),
            ("a voice object without an id", {"extra_body": {"voice": {"name": "slt"}}}, "voice")]:
        try:
            client.audio.speech.create(model="tts-1", voice="slt", input=TEXT, **kwargs)
            check(f"{name} -> 400", False, "accepted")
        except openai.BadRequestError as e:
            err = e.body if isinstance(e.body, dict) else {}
            check(f"{name} -> 400, param {param}", e.status_code == 400 and err.get("param") == param,
                  (e.status_code, e.body))
            if name == "aiff":
                offered = "mp3, opus, aac, wav, flac, pcm" if AAC else "mp3, opus, wav, flac, pcm"
                check("aiff's message names what is offered", offered in err.get("message", ""),
                      err)

    # Keys: wrong (the client), missing (no Authorization header at all).
    # Twice on one kept-alive connection: the refused request's body must not be taken
    # for the next request.
    bad = openai.OpenAI(base_url=base, api_key="sk-wrong", max_retries=0)
    for attempt in ["", " (again, same connection)"]:
        try:
            bad.audio.speech.create(model="tts-1", voice="slt", input=TEXT)
            check("a wrong key -> 401", False, "accepted")
        except openai.AuthenticationError as e:
            check("a wrong key -> 401 invalid_api_key" + attempt,
                  e.status_code == 401 and e.code == "invalid_api_key", (e.status_code, e.body))
    for path, body in [("/audio/speech", json.dumps({"input": TEXT}).encode()), ("/models", None),
                       ("/nothing", None)]:
        req = urllib.request.Request(base + path, data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=30)
            check(f"no key on {path} -> 401", False, "accepted")
        except urllib.error.HTTPError as e:
            err = json.loads(e.read()).get("error", {})
            check(f"no key on {path} -> 401 in OpenAI's error shape",
                  e.code == 401 and set(err) == {"message", "type", "param", "code"}, (e.code, err))

    models = client.models.list()
    ids = [m.id for m in models.data]
    check("models.list() lists the voices",
          ids[:4 if PIPER_NAME else 3] == [v for v in ["slt", PIPER_NAME, "rms", "awb"] if v] and all(m.object == "model" for m in models.data)
          and all(isinstance(m.created, int) and m.owned_by for m in models.data), ids)
    m = client.models.retrieve("rms")
    check("models.retrieve() gives one of them", m.id == "rms" and m.object == "model", m)
    try:
        client.models.retrieve("no-such-voice")
        check("models.retrieve() of another -> 404", False, "found")
    except openai.NotFoundError as e:
        check("models.retrieve() of another -> 404 model_not_found", e.code == "model_not_found",
              e.body)

    # A model from that list speaks as that voice where "voice" is one of OpenAI's names
    # (a client that offers the models and sends only OpenAI's voices, as pipecat's does).
    data = client.audio.speech.create(model="rms", voice="alloy", input=TEXT,
                                      response_format="pcm").content
    check("model \"rms\" with voice \"alloy\" speaks as rms",
          np.array_equal(np.frombuffer(data, dtype="<i2"), offline("rms", "--rate", "24000")))
    # "instructions" is taken (a voice here has no such control) and checked as a string.
    data = client.audio.speech.create(model="tts-1", voice="slt", input=TEXT, response_format="pcm",
                                      instructions="Speak calmly.").content
    check("instructions are taken", np.array_equal(np.frombuffer(data, dtype="<i2"),
                                                   offline("slt", "--rate", "24000")))
    try:
        client.audio.speech.create(model="tts-1", voice="slt", input=TEXT, instructions=5)
        check("instructions 5 -> 400", False, "accepted")
    except openai.BadRequestError as e:
        check("instructions 5 -> 400 invalid_instructions", e.code == "invalid_instructions",
              e.body)
    # The scheme's name in any case (RFC 9110), and every reply dated.
    req = urllib.request.Request(f"{base}/models", headers={"Authorization": f"bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=30) as r:  # a 401 raises HTTPError: a FAIL
        date, status = r.headers.get("Date", ""), r.status
    check("Authorization: bearer KEY is taken", status == 200, status)
    check("replies carry a Date header (IMF-fixdate)",
          re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", date),
          date)
    if failures:
        print("server log:\n" + "".join(log[-20:]))


if __name__ == "__main__":
    main()
