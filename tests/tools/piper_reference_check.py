"""The stored Piper test voices (tests/data/piper/) still say what their
reference audio says: ONNX Runtime running each saved .onnx on the reference
phoneme ids, with noise_scale = noise_w = 0, gives the stored audio (within
1e-4, the parity tolerance; float32 rounding is about 2e-6), sample count
included. Needs onnxruntime from PyPI (the test venv): exits 77 (skipped),
saying so, without it.

  BUILD/pyenv/bin/python tests/tools/piper_reference_check.py
"""

import json
import os
import sys

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "piper")


def main():
    try:
        import onnxruntime
    except ImportError:
        print("SKIP: onnxruntime is not installed (scripts/bootstrap.sh test installs it "
              "from PyPI into BUILD/pyenv)")
        return 77
    with open(os.path.join(DATA, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    ids = np.array([ref["phoneme_ids"]], dtype=np.int64)
    failed = False
    for name, voice in ref["voices"].items():
        opts = onnxruntime.SessionOptions()
        opts.log_severity_level = 3
        sess = onnxruntime.InferenceSession(os.path.join(DATA, name + ".onnx"), opts,
                                            providers=["CPUExecutionProvider"])
        feeds = {"input": ids, "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
                 "scales": np.array([ref["noise_scale"], voice["length_scale"], ref["noise_w"]],
                                    dtype=np.float32)}
        if voice["speaker_id"] is not None:
            feeds["sid"] = np.array([voice["speaker_id"]], dtype=np.int64)
        out = sess.run(["output"], feeds)[0].reshape(-1)
        want = np.load(os.path.join(DATA, voice["audio"]))
        frames = sum(voice["durations"])
        if out.size != want.size or want.size != frames * 256:
            print(f"FAIL {name}: {out.size} samples from onnxruntime, {want.size} stored, "
                  f"{frames} frames of durations")
            failed = True
            continue
        diff = float(np.max(np.abs(out - want)))
        print(f"{'FAIL' if diff > 1e-4 else 'ok  '} {name}: {out.size} samples, "
              f"max |onnxruntime - stored| = {diff:.2e}")
        failed |= diff > 1e-4
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
