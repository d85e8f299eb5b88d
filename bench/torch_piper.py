#!/usr/bin/env python3
"""Plain PyTorch on a Piper voice, whole sentences in one batch: the
yardstick issue 41 sets for the engine on a GPU ("at least PyTorch's own
throughput on the same GPU"), run by the GPU pack beside
etude_many_streams on the same weights and ids.

  python3 bench/torch_piper.py --model full_medium.pt \\
      --ids-from tests/data/piper/reference.json [--batches 16,64,256,1024] \\
      [--device cuda] [--precision fp32,fp32-strict,fp16] [--rounds 3]

--model is what tools/piper_reference/make_voices.py --full-size writes
beside each .onnx (the hyperparameters and the weights), so PyTorch and the
engine speak the same voice; its .onnx.json gives the scales the engine
uses (noise_scale, length_scale, noise_w). Every sentence of a batch is
the file's "phoneme_ids"; the model is tools/piper_reference/vits.py
(Piper's inference path), eager, under torch.inference_mode(). fp32 is
PyTorch's defaults, under which cuDNN's convolutions may use TF32 tensor
cores on Ampere and newer GPUs (torch.backends.cudnn.allow_tf32 is True
by default; the matrix products' flag is False): inputs rounded to 10
bits of mantissa. fp32-strict turns TF32 off for both, the precision the
engine's CUDA backend computes in (cuBLAS's default math), so the engine
compares with it like for like. fp16 is torch.autocast on CUDA (fp32
weights, fp16 matrix products and convolutions). For each batch size: the median of --rounds timed batches
after one untimed one, and the aggregate speed, seconds of speech per
second (batch x one sentence's samples / rate / time). Prints the device
and the CPU model: numbers belong to the machine they came from.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools", "piper_reference"))
sys.path.insert(0, HERE)
import vits  # noqa: E402
from onnx_sessions import cpu_model  # noqa: E402  (beside it here and in the GPU pack)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a .pt from make_voices.py --full-size")
    ap.add_argument("--ids-from", required=True, help='a JSON file with a "phoneme_ids" array')
    ap.add_argument("--batches", default="16,64,256,1024")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", default="fp32,fp32-strict,fp16",
                    help="fp32 (PyTorch's defaults), fp32-strict (no TF32), fp16 (CUDA only)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    try:
        saved = torch.load(args.model, map_location="cpu")
        with open(os.path.splitext(args.model)[0] + ".onnx.json") as f:
            config = json.load(f)
        with open(args.ids_from) as f:
            ids = [int(i) for i in json.load(f)["phoneme_ids"]]
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        sys.exit(f"torch_piper: {e}")
    model = vits.SynthesizerInfer(saved["hp"])
    model.load_state_dict(saved["state_dict"])
    model = model.eval().to(args.device)
    inference = config.get("inference", {})
    rate = config["audio"]["sample_rate"]
    device = args.device
    name = torch.cuda.get_device_name() if device.startswith("cuda") else cpu_model()
    print(f"PyTorch {torch.__version__} eager on {device} ({name}); host {cpu_model()}; "
          f"{os.path.basename(args.model)}; {len(ids)} ids per sentence; "
          f"{args.rounds} rounds after one untimed")

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    default_tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    for precision in args.precision.split(","):
        if precision == "fp16" and not device.startswith("cuda"):
            print("fp16: skipped (autocast to fp16 is for CUDA)")
            continue
        if precision not in ("fp32", "fp32-strict", "fp16"):
            sys.exit(f"torch_piper: unknown precision {precision!r} (fp32, fp32-strict, fp16)")
        strict = precision == "fp32-strict"
        torch.backends.cudnn.allow_tf32 = False if strict else default_tf32[0]
        torch.backends.cuda.matmul.allow_tf32 = False if strict else default_tf32[1]
        if device.startswith("cuda"):
            print(f"{precision}: TF32 allowed in cuDNN convolutions "
                  f"{torch.backends.cudnn.allow_tf32}, in matrix products "
                  f"{torch.backends.cuda.matmul.allow_tf32}")
        for batch in [int(b) for b in args.batches.split(",")]:
            x = torch.tensor([ids] * batch, device=device)
            lengths = torch.full((batch,), len(ids), device=device)

            def run():
                with torch.inference_mode(), torch.autocast(
                        "cuda", dtype=torch.float16, enabled=precision == "fp16"):
                    return model.infer(x, lengths,
                                       noise_scale=inference.get("noise_scale", 0.667),
                                       length_scale=inference.get("length_scale", 1.0),
                                       noise_scale_w=inference.get("noise_w", 0.8))

            try:
                samples = run().shape[-1]
                sync()
                times = []
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    run()
                    sync()
                    times.append(time.perf_counter() - t0)
            except torch.cuda.OutOfMemoryError:
                print(f"{precision} batch {batch:5d}: out of memory")
                torch.cuda.empty_cache()
                continue
            t = statistics.median(times)
            print(f"{precision} batch {batch:5d}: {t * 1000:8.1f} ms for {batch} sentences of "
                  f"{samples / rate:.2f} s  aggregate {batch * samples / rate / t:8.1f}x real time",
                  flush=True)


if __name__ == "__main__":
    main()
