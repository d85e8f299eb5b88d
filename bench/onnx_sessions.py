#!/usr/bin/env python3
"""ONNX Runtime's aggregate speed on the host's cores, the way a server
without LibEtude would use them: one single-thread session per core, each
in a process of its own, each making whole sentences one after another.
The yardstick issue 41 sets for LibEtude's CPU-only aggregate
(`etude_many_streams --backend cpu`, its "offline" column).

  BUILD/pyenv/bin/python bench/onnx_sessions.py --voice VOICE.onnx \\
      --ids-from tests/data/piper/reference.json --streams 16 \\
      [--sessions N] [--rounds 3] [--etude BUILD/bench/etude_many_streams]

The work is etude_many_streams' with --ids-from: each of --streams streams
speaks the file's "phoneme_ids" three times over (three sentences), so both
programs make the same audio from the same ids. The streams are shared out
among --sessions processes (default: the usable CPUs); each process loads
its session and makes one warm-up sentence before a common start, and the
speed is all the audio made over the wall time from that start to the last
process's end. Scales come from the voice's .onnx.json ("inference"), as
the engine takes them.

With --etude, the same counts run through etude_many_streams with the same
voice and ids, alternated with ONNX Runtime round by round (the machines
this runs on are shared and noisy, so the two are measured side by side),
and a line gives each round's ratio. Prints the CPU model: numbers belong
to the machine they came from (docs/benchmarks.md).
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import statistics
import subprocess
import sys
import time

SENTENCES_PER_STREAM = 3  # etude_many_streams' Reply::kIdSentences


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


def session_worker(voice, ids, scales, sentences, start, results):
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(voice, options, providers=["CPUExecutionProvider"])
    feed = {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": np.array(scales, dtype=np.float32),
    }
    if any(i.name == "sid" for i in session.get_inputs()):
        feed["sid"] = np.array([0], dtype=np.int64)
    session.run(None, feed)  # warm-up, before the common start
    start.wait()
    samples = 0
    for _ in range(sentences):
        samples += session.run(None, feed)[0].size
    results.put((samples, time.perf_counter()))


def onnx_round(voice, ids, scales, streams, sessions, rate):
    """Seconds of audio per second of wall time for `streams` streams."""
    ctx = mp.get_context("spawn")  # no inherited ONNX Runtime state
    share = [streams // sessions + (1 if k < streams % sessions else 0) for k in range(sessions)]
    share = [n for n in share if n > 0]  # fewer streams than sessions: the rest stay idle
    start, results = ctx.Barrier(len(share) + 1), ctx.Queue()
    procs = [
        ctx.Process(target=session_worker,
                    args=(voice, ids, scales, n * SENTENCES_PER_STREAM, start, results))
        for n in share
    ]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.perf_counter()
    ends = [results.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"onnx_sessions: a session process failed (exit {p.exitcode})")
    wall = max(end for _, end in ends) - t0
    return sum(samples for samples, _ in ends) / rate / wall


def etude_round(etude, voice, ids_file, streams):
    out = subprocess.run(
        [etude, "--voice", voice, "--ids-from", ids_file, "--streams", str(streams),
         "--rounds", "1", "--backend", "cpu", "--offline-only"],
        capture_output=True, text=True, check=True).stdout
    m = re.search(r"offline\s+([0-9.]+)x", out)
    if not m:
        sys.exit("onnx_sessions: no offline figure in etude_many_streams' output:\n" + out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voice", required=True, help="a Piper .onnx voice (its .onnx.json beside)")
    ap.add_argument("--ids-from", required=True, help='a JSON file with a "phoneme_ids" array')
    ap.add_argument("--streams", default="16", help="comma-separated counts (default 16)")
    ap.add_argument("--sessions", type=int, default=len(os.sched_getaffinity(0)),
                    help="single-thread sessions, one process each (default: the usable CPUs)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--etude", help="etude_many_streams, to run beside ONNX Runtime")
    args = ap.parse_args()

    try:
        with open(args.voice + ".json") as f:
            config = json.load(f)
        with open(args.ids_from) as f:
            ids = [int(i) for i in json.load(f)["phoneme_ids"]]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"onnx_sessions: {e}")
    inference = config.get("inference", {})
    scales = [inference.get("noise_scale", 0.667), inference.get("length_scale", 1.0),
              inference.get("noise_w", 0.8)]
    rate = config["audio"]["sample_rate"]
    import onnxruntime

    print(f"{cpu_model()}, {len(os.sched_getaffinity(0))} CPUs; {os.path.basename(args.voice)}; "
          f"{len(ids)} ids x {SENTENCES_PER_STREAM} sentences per stream; ONNX Runtime "
          f"{onnxruntime.__version__}, {args.sessions} single-thread sessions; "
          f"{args.rounds} rounds")
    for streams in [int(s) for s in args.streams.split(",")]:
        ort_speeds, etude_speeds = [], []
        for _ in range(args.rounds):
            ort_speeds.append(onnx_round(args.voice, ids, scales, streams, args.sessions, rate))
            if args.etude:
                etude_speeds.append(etude_round(args.etude, args.voice, args.ids_from, streams))
        line = (f"{streams:5d} streams  ONNX Runtime median {statistics.median(ort_speeds):6.1f}x "
                f"({', '.join(f'{s:.1f}' for s in ort_speeds)})")
        if etude_speeds:
            ratios = [e / o for e, o in zip(etude_speeds, ort_speeds)]
            line += (f"  LibEtude median {statistics.median(etude_speeds):6.1f}x "
                     f"({', '.join(f'{s:.1f}' for s in etude_speeds)})  LibEtude / ORT per round "
                     f"{', '.join(f'{r:.2f}' for r in ratios)}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
