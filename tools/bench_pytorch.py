#!/usr/bin/python3
"""PyTorch CPU baseline for the neural vocoders: real-time factor of eager inference.

  /usr/bin/python3 tools/make_parity_data.py --full-size /tmp/etude_full
  /usr/bin/python3 tools/bench_pytorch.py --models /tmp/etude_full --threads 2

For each of hifigan_v1, hifigan_v3 and vocos found in --models (the LEF files
and 200-frame mels written by make_parity_data.py --full-size), the model is
rebuilt in PyTorch from the LEF tensors (tools/lef.py, tools/reference_models.py;
HiFi-GAN without weight norm, as after the official remove_weight_norm()) and
timed under torch.inference_mode() in float32:
  - "whole": one forward over the 200-frame mel (the whole utterance);
  - "chunk32": one forward over 32 frames (a streaming chunk, without the
    context frames a real stream would recompute).
Audio seconds are the samples the input stands for (frames * hop / rate; for
Vocos' whole utterance, the (frames - 1) * hop samples torch.istft returns).
RTF = audio seconds / compute seconds (above 1 is faster than real time); the
compute time is the median over the runs (the fastest run is shown too: on a
shared machine it is the better estimate of what the CPU can do).

Also writes <name>_torch_out.npy to --models: PyTorch's output for the
200-frame mel, computed in float64 from the same float32 weights (a reference
for the C++ engine at full size).
"""

import argparse
import copy
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lef  # noqa: E402
import reference_models as rm  # noqa: E402

MODELS = ("hifigan_v1", "hifigan_v3", "vocos")
CHUNK_FRAMES = 32


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def time_forward(forward, mel, budget_s, min_runs=3, max_runs=50):
    """(median, fastest, runs) seconds of forward(mel) after one warm-up run; runs until
    budget_s is spent (at least min_runs)."""
    with torch.inference_mode():
        forward(mel)
        times = []
        start = time.perf_counter()
        while len(times) < min_runs or (len(times) < max_runs
                                        and time.perf_counter() - start < budget_s):
            t0 = time.perf_counter()
            forward(mel)
            times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), len(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="folder written by "
                        "make_parity_data.py --full-size")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(),
                        help="torch.set_num_threads (default: torch's default, %(default)s)")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="time budget per measurement (at least 3 runs; default 5)")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, "
          f"{os.cpu_count()} CPUs: {cpu_name()}")

    rows = []
    found = False
    for name in MODELS:
        lef_path = os.path.join(args.models, name + ".lef")
        mel_path = os.path.join(args.models, name + "_mel.npy")
        if not os.path.exists(lef_path):
            print(f"{name}: {lef_path} not found, skipped")
            continue
        found = True
        model_file = lef.read(lef_path)
        meta = model_file.metadata
        model, forward = rm.model_from_lef(model_file)
        mel = torch.from_numpy(np.load(mel_path).astype(np.float32))[None]
        frames = mel.shape[-1]
        rate, hop = meta["sample_rate"], meta["hop"]
        params = sum(v.size for v in model_file.tensors.values())

        # The reference output, in float64 (more exact than what is timed).
        double = copy.deepcopy(model).double()
        with torch.inference_mode():
            y = double(mel.double())[:, 0] if meta["architecture"] == "hifigan" else \
                double.decode(mel.double())
        out = y[0].numpy().astype(np.float32)
        np.save(os.path.join(args.models, name + "_torch_out.npy"), out)
        del double

        whole_audio = out.shape[0] / rate
        cases = [("whole", mel, whole_audio),
                 (f"chunk{CHUNK_FRAMES}", mel[..., :CHUNK_FRAMES].contiguous(),
                  CHUNK_FRAMES * hop / rate)]
        for label, x, audio_s in cases:
            compute_s, fastest_s, runs = time_forward(forward, x, args.seconds)
            rows.append((name, f"{params / 1e6:.2f}M", label, x.shape[-1],
                         torch.get_num_threads(), audio_s, compute_s, audio_s / compute_s,
                         fastest_s, runs))
            print(f"  {name} {label}: {compute_s * 1e3:.1f} ms (fastest {fastest_s * 1e3:.1f}) "
                  f"for {audio_s:.3f} s of audio (RTF {audio_s / compute_s:.2f}, {runs} runs)",
                  flush=True)
        print(f"  {name}: wrote {name}_torch_out.npy ({out.shape[0]} samples from {frames} "
              f"frames)", flush=True)
    if not found:
        print(f"no models in {args.models}; run make_parity_data.py --full-size first",
              file=sys.stderr)
        return 1

    print()
    print("| model | params | input | frames | threads | audio s | compute s (median) | "
          "RTF | compute s (fastest) | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, params, label, frames, threads, audio_s, compute_s, rtf, fastest_s, runs in rows:
        print(f"| {name} | {params} | {label} | {frames} | {threads} | {audio_s:.3f} | "
              f"{compute_s:.4f} | {rtf:.2f} | {fastest_s:.4f} | {runs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
