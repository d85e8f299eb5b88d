#!/usr/bin/env python3
"""etude serve --http: the OpenAI-style speech endpoint, fetched with curl.

A WAV streamed with chunked transfer holds exactly the samples of the offline render
(`etude say --raw`, same text and voice, the voice's rate), after a 44-byte header; pcm is
the offline render at OpenAI's 24 kHz (`etude say --rate 24000 --raw`); no response_format
gives mp3; bad requests get a 4xx status and a JSON {"error": {...}} body.
(openai_client_test.py checks every format through the `openai` client.)

Usage: http_speech_test.py ETUDE. Exit 77 (skip) without curl.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from pass_fail import check, failures  # PASS/FAIL lines, shared by the server tests

ETUDE = sys.argv[1]
if not shutil.which("curl"):
    print("SKIP: curl is not installed")
    sys.exit(77)

TEXT = "Your timer for ten minutes has started. The front door is locked!"
# Whether this build makes aac (tests/CMakeLists.txt passes what the build found).
AAC = os.environ.get("ETUDE_TEST_AAC", "1") == "1"
FORMATS = ["mp3", "opus"] + (["aac"] if AAC else []) + ["wav", "flac", "pcm"]


def curl(url, body=None, method=None):
    """(status, headers, body bytes)"""
    cmd = ["curl", "-sS", "-N", "-D", "-", "--max-time", "60", url]
    if body is not None:  # from standard input: a long body does not fit in argv
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    if method:
        cmd += ["-X", method]
    out = subprocess.run(cmd, check=True, capture_output=True,
                         input=body.encode() if body is not None else None).stdout
    head, _, data = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, data


def main():
    proc = subprocess.Popen([ETUDE, "serve", "--http", "127.0.0.1:0"], stderr=subprocess.PIPE,
                            text=True)
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    assert m, line
    log = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    base = f"http://127.0.0.1:{m.group(1)}"
    try:
        for voice in ["slt", "awb"]:
            ref = subprocess.run([ETUDE, "say", "--voice", voice, "--raw", TEXT], check=True,
                                 capture_output=True).stdout
            req = json.dumps({"model": "tts-1", "input": TEXT, "voice": voice,
                              "response_format": "wav"})
            status, headers, wav = curl(base + "/v1/audio/speech", req)
            check(f"wav {voice}: 200, chunked, audio/wav",
                  status == 200 and headers.get("transfer-encoding") == "chunked"
                  and headers.get("content-type") == "audio/wav", (status, headers))
            check(f"wav {voice}: header says 16 kHz, 16-bit mono",
                  wav[:4] == b"RIFF" and wav[8:16] == b"WAVEfmt "
                  and int.from_bytes(wav[22:24], "little") == 1
                  and int.from_bytes(wav[24:28], "little") == 16000
                  and int.from_bytes(wav[34:36], "little") == 16, wav[:44])
            check(f"wav {voice}: samples equal the offline render", wav[44:] == ref,
                  f"{len(wav) - 44} bytes against {len(ref)}")
        status, _, pcm = curl(base + "/v1/audio/speech",
                              json.dumps({"input": TEXT, "response_format": "pcm"}))
        ref = subprocess.run([ETUDE, "say", "--rate", "24000", "--raw", TEXT], check=True,
                             capture_output=True).stdout
        check("pcm (default voice) equals the offline render at 24 kHz",
              status == 200 and pcm == ref, (status, len(pcm), len(ref)))
        status, _, pcm = curl(base + "/v1/audio/speech", json.dumps(
            {"input": TEXT, "response_format": "pcm", "sample_rate": 16000}))
        ref = subprocess.run([ETUDE, "say", "--raw", TEXT], check=True, capture_output=True).stdout
        check("pcm with sample_rate 16000 equals the offline render at the voice's rate",
              status == 200 and pcm == ref, (status, len(pcm), len(ref)))
        status, headers, mp3 = curl(base + "/v1/audio/speech", json.dumps({"input": TEXT}))
        check("no response_format: mp3 (audio/mpeg, MPEG frames)",
              status == 200 and headers.get("content-type") == "audio/mpeg"
              and mp3[0] == 0xFF and mp3[1] >= 0xE0, (status, headers, mp3[:4]))
        status, headers, opus = curl(base + "/v1/audio/speech",
                                     json.dumps({"input": TEXT, "response_format": "opus"}))
        check("opus: audio/ogg, an Ogg Opus stream",
              status == 200 and headers.get("content-type") == "audio/ogg"
              and opus[:4] == b"OggS" and b"OpusHead" in opus[:100], (status, opus[:40]))
        status, headers, aac = curl(base + "/v1/audio/speech",
                                    json.dumps({"input": TEXT, "response_format": "aac"}))
        if AAC:
            check("aac: audio/aac, ADTS frames (the sync word, AAC-LC, 24 kHz, mono)",
                  status == 200 and headers.get("content-type") == "audio/aac"
                  and aac[0] == 0xFF and aac[1] & 0xF6 == 0xF0 and (aac[2] >> 6) == 1
                  and (aac[2] >> 2) & 0xF == 6 and ((aac[2] & 1) << 2 | aac[3] >> 6) == 1,
                  (status, headers.get("content-type"), aac[:8]))
        else:
            check("aac: 400 where the build has no AAC encoder, naming what it makes",
                  status == 400 and b"mp3, opus, wav, flac, pcm" in aac, (status, aac[:200]))
        status, headers, flac = curl(base + "/v1/audio/speech",
                                     json.dumps({"input": TEXT, "response_format": "flac"}))
        check("flac: 200, audio/flac, fLaC stream",
              status == 200 and headers.get("content-type") == "audio/flac"
              and flac[:4] == b"fLaC" and len(flac) < len(ref), (status, flac[:4], len(flac)))
        status, _, body = curl(base + "/v1/audio/voices")
        voices = json.loads(body)["voices"]
        check("voices listed", status == 200 and [v["id"] for v in voices][:3] == ["slt", "rms", "awb"],
              body[:200])
        check("formats listed", json.loads(body)["formats"] == FORMATS,
              body[-100:])
        status, _, body = curl(base + "/v1/models")
        models = json.loads(body)
        check("models listed", status == 200 and models["object"] == "list"
              and [m["id"] for m in models["data"]][:3] == ["slt", "rms", "awb"]
              and all(m["object"] == "model" for m in models["data"]), body[:200])

        bad = [
            ("not json", "{nope", 400),
            ("not an object", "[1, 2]", 400),
            ("no input", "{}", 400),
            ("input not a string", '{"input": 5}', 400),
            ("empty input", '{"input": "   "}', 400),
            ("unknown voice", '{"input": "Hi.", "voice": "no-such-voice"}', 400),
            ("unknown format", '{"input": "Hi.", "response_format": "aiff"}', 400),
            ("aac at 20 kHz", '{"input": "Hi.", "response_format": "aac", "sample_rate": 20000}', 400),
            ("speed too low", '{"input": "Hi.", "speed": 0.2}', 400),
            ("speed out of range", '{"input": "Hi.", "speed": 4.5}', 400),
            ("sample_rate not a number", '{"input": "Hi.", "sample_rate": "high"}', 400),
            ("sample_rate fractional", '{"input": "Hi.", "sample_rate": 16000.5}', 400),
            ("sample_rate too low", '{"input": "Hi.", "response_format": "wav", "sample_rate": 4000}', 400),
            ("mp3 at 96 kHz", '{"input": "Hi.", "response_format": "mp3", "sample_rate": 96000}', 400),
            ("speed not a number", '{"input": "Hi.", "speed": "fast"}', 400),
            ("too long", json.dumps({"input": "word " * 30000}), 400),
            ("deep nesting", '{"input": "Hi.", "x": ' + "[" * 100 + "]" * 100 + "}", 400),
        ]
        for name, body, want in bad:
            status, headers, data = curl(base + "/v1/audio/speech", body)
            try:
                err = json.loads(data)["error"]
                ok = (status == want and err["message"] and "param" in err
                      and headers.get("content-type") == "application/json")
            except (ValueError, KeyError, TypeError):
                ok = False
            check(f"bad request ({name}) -> {want} JSON error", ok, (status, data[:200]))
        # A client that goes away mid-reply cancels it (and the server goes on).
        long_input = json.dumps({"input": (TEXT + " ") * 60, "response_format": "pcm"})
        aborted = subprocess.run(["curl", "-sS", "-N", "--max-time", "0.5", "-o", "/dev/null",
                                  "--data-binary", "@-", base + "/v1/audio/speech"],
                                 input=long_input.encode(), capture_output=True)
        check("long reply: curl gave up mid-stream", aborted.returncode == 28, aborted.returncode)
        deadline = time.monotonic() + 15
        while not any(l.rstrip().endswith("cancelled") for l in log) and time.monotonic() < deadline:
            time.sleep(0.1)
        check("the abandoned reply is cancelled", any(l.rstrip().endswith("cancelled") for l in log),
              log[-3:])
        status, _, data = curl(base + "/v1/nothing")
        check("unknown path -> 404 JSON error", status == 404 and "error" in json.loads(data),
              (status, data[:100]))
        status, _, data = curl(base + "/v1/audio/speech", method="GET")
        check("wrong method -> 4xx", 400 <= status < 500, status)
        # SIGTERM in the middle of a long reply: the reply is cut (curl sees the chunked
        # transfer end early), the server exits at once with status 0.
        long_reply = subprocess.Popen(
            ["curl", "-sS", "-N", "-H", "Content-Type: application/json",
             "--data-binary", "@-", base + "/v1/audio/speech"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        long_reply.stdin.write(json.dumps({"input": (TEXT + " ") * 150}).encode())
        long_reply.stdin.close()
        long_reply.stdout.read(4096)  # the reply is under way
        threading.Thread(target=lambda: long_reply.stdout.read(), daemon=True).start()
    finally:
        t0 = time.monotonic()
        proc.terminate()
        rc = proc.wait(timeout=30)
        stopped_in = time.monotonic() - t0
    check("server exits 0 on SIGTERM", rc == 0, rc)
    check("SIGTERM ends a reply in progress at once", stopped_in < 5, f"{stopped_in:.1f} s")
    check("the cut reply is not a complete one to curl", long_reply.wait(timeout=30) == 18,
          long_reply.returncode)
    if failures:
        print("server log:\n" + "".join(log[-20:]))
        sys.exit(1)


if __name__ == "__main__":
    main()
