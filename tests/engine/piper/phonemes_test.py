#!/usr/bin/env python3
"""Phonemes: `etude phonemize` gives the ids computed independently here.

The reference is the espeak-ng program itself (`espeak-ng -q --ipa -v VOICE`,
one line of IPA per clause), with Piper's rules applied in Python: the
clause's punctuation (read from the text) put back, "." "?" "!" closing a
sentence and "," ":" ";" followed by a space, "(en)" flags removed, NFD,
one codepoint per phoneme, ids laid out ^ _ (p _)* $ with phonemes missing
from the map skipped. Nothing of LibEtude's C++ is used for the reference.

With --piper-python (the test venv), it also runs piper-tts's own
phonemizer (piper.espeakbridge, which bundles a newer espeak-ng): the
sentence split and the punctuation must be the same; the phonemes may
differ where the two espeak-ng versions pronounce differently, and those
differences are printed.

Exit 0 pass, 1 fail, 77 skip (no espeak-ng program).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

SENTENCES = {
    "en-us": [
        "Hello, world.",
        "Is this a question? Yes! It is.",
        "Listen: three things; first, second, third.",
        "The meeting is at 10:30 on March 3rd, 2024, in room 101.",
        "It costs $3.50, or 3,500 yen.",
        "Dr. Smith lives on Elm St. near the U.S.A. border.",
        "Mr. smith is here. e.g. this one.",
        "Wait?! Really!! Yes.",
        "He paused... then left.",
        'He said "hi." Then (quietly) left.',
        "No punctuation at the end",
        "One sentence. Two sentences. Three sentences on one line.",
        "A résumé, a naïve café and a façade.",
        "Numbers: 1, 2, 3; 42 and 1,000,000.",
        "Hello . World",
        'He said, "Stop!" and left.',
        'She said: "yes".',
        "He said, 'no'.",
    ],
    "de": ["Guten Tag, wie geht es Ihnen? Mir geht es gut.", "Das kostet 12,50 Euro: teuer!"],
    "fr": ["Bonjour, ça va? Très bien; merci.", "C'est l'été: il fait chaud!"],
    "es": ["¿Dónde está la biblioteca? Está allí, a la derecha."],
}

# Compared with piper-tts only (sentence split and punctuation): texts whose
# clause ends the simple rules of clause_marks() do not cover.
PIPER_ONLY = {
    "en-us": [
        "Wait -- what? No \u2014 never; A \u2013 B.",
        "Line one.\nLine two.\n\nNew paragraph",
        "Is it?\n\nYes,\n\nthere",
        "First line\nsecond line, same sentence",
        "Ellipsis char\u2026 then more\u2026 done.",
        "What?!?! Seriously...",
        "Items: (a) one, (b) two.",
        "\u201cStart\u201d of text. The end.\u201d",
        "Mr. and Mrs. Smith vs. the U.K. team.",
        "Visit https://example.com/a.b?c=d, or email me@example.com.",
        "Call 555-1234, ext. 5. See fig. 3 for details.",
        ".",
        "?!",
        ", , ,",
        "...",
        " ".join(["word"] * 150) + " and an end.",
        "Say [[ hˈɛloʊ ]] to them. And [[wˈɜːld]], too!",
        "[[bˈaɪ]] Next sentence. Last[[ə]]",
        "Before. [[ ʃˈʊɹ ]]",
        "Broken [[ block\nover ]] two lines.",
    ],
    "fr": ["\u00ab Bonjour \u00bb, dit-il. \u00c7a va ?"],
    "de": ["\u201eHallo\u201c, sagte er. Wie geht\u2019s?"],
    "es": ["\u00a1Hola! \u00bfQu\u00e9 tal? Bien, gracias."],
    "ru": ["\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a "
           "\u0434\u0435\u043b\u0430?"],
    "el": ["\u0393\u03b5\u03b9\u03b1 \u03c3\u03bf\u03c5; \u039a\u03b1\u03bb\u03ac."],
    "ar": ["\u0645\u0631\u062d\u0628\u0627\u060c \u0643\u064a\u0641 "
           "\u062d\u0627\u0644\u0643\u061f \u0628\u062e\u064a\u0631."],
    "hi": ["\u0928\u092e\u0938\u094d\u0924\u0947\u0964 \u0906\u092a \u0915\u0948\u0938\u0947 "
           "\u0939\u0948\u0902?"],
    "cmn": ["\u4f60\u597d\u3002\u4e16\u754c\uff0c\u4f60\u597d\uff01\u518d\u89c1\uff1f"],
}

MARK_AFTER_SPACE = {",", ":", ";"}


def clause_marks(text):
    """(mark, ends_sentence) per clause, from the text by Piper's rules."""
    marks = []
    pos = 0
    pattern = re.compile(r"(\.{2,}|…|[.?!,:;¿¡]+)([\"')\]”’]*)(?=\s|$)")
    for m in pattern.finditer(text):
        run = m.group(1)
        rest = text[m.end():].lstrip()
        if run[0] in "¿¡":
            continue  # Spanish opening marks start a clause, they do not end one
        if len(run) > 1 and set(run) == {"."} or run == "…":
            marks.append(("", False))
        elif run[0] == ".":
            # espeak-ng: a dot before a lower-case word does not end a clause
            if rest and rest[0].islower():
                continue
            marks.append((".", True))
        elif run[0] in "?!":
            marks.append((run[0], True))
        else:
            marks.append((run[0], False))
        pos = m.end()
    if text[pos:].strip():
        marks.append(("", True))
    else:
        marks[-1] = (marks[-1][0], True)
    return marks


def espeak_clauses(voice, text):
    out = subprocess.run(["espeak-ng", "-q", "--ipa", "-v", voice, text],
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def reference_sentences(voice, text):
    lines = espeak_clauses(voice, text)
    marks = clause_marks(text)
    if len(lines) != len(marks):
        raise AssertionError(f"{voice} {text!r}: espeak-ng gave {len(lines)} clauses, "
                             f"the text has {len(marks)}: {lines} {marks}")
    sentences, current = [], []
    for ipa, (mark, ends) in zip(lines, marks):
        ipa = re.sub(r"\([^)]+\)", "", ipa) + mark
        if mark in MARK_AFTER_SPACE:
            ipa += " "
        current.extend(unicodedata.normalize("NFD", ipa))
        if ends:
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)
    return [s for s in sentences if s]


def ids_of(phonemes, id_map):
    ids = id_map["^"] + id_map["_"]
    for p in phonemes:
        if p in id_map:
            ids += id_map[p] + id_map["_"]
    return ids + id_map["$"]


def etude_sentences(etude, config, text):
    # One line goes in on standard input (CLI11 2.1 would split an argument
    # such as "[[a]] b, c[[d]]" at its commas); text with line breaks, which
    # standard input would cut into lines, as the argument.
    if "\n" in text:
        out = subprocess.run([etude, "phonemize", "--voice", config, text],
                             capture_output=True, text=True)
    else:
        out = subprocess.run([etude, "phonemize", "--voice", config], input=text + "\n",
                             capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"etude phonemize failed ({out.returncode}): {out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines()]


def bounded_split(piper, got):
    """LibEtude closes a sentence at the first clause end past 400 phonemes
    (Phonemizer::kMaxSentencePhonemes); Piper does not. True when that is
    the only difference: the same phonemes, cut after 400 or more."""
    if len(piper) != 1 or len(got) < 2:
        return False
    joined = [p for g in got for p in g["phonemes"]]
    return joined == piper[0] and all(len(g["phonemes"]) >= 400 for g in got[:-1])


# piper-tts's own front end (PiperVoice.phonemize: [[ phoneme ]] blocks, then
# EspeakPhonemizer with its bundled espeak-ng); no network is loaded.
PIPER_SCRIPT = r"""
import json, sys
from piper.config import PiperConfig
from piper.voice import PiperVoice
base = json.loads(sys.stdin.readline())
for line in sys.stdin:
    voice, text = json.loads(line)
    config = PiperConfig.from_dict(dict(base, espeak={"voice": voice}))
    sentences = PiperVoice(session=None, config=config).phonemize(text)
    print(json.dumps([s for s in sentences if s], ensure_ascii=False), flush=True)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etude", required=True)
    ap.add_argument("--config", required=True, help="an en-us Piper voice config")
    ap.add_argument("--piper-python")
    args = ap.parse_args()
    if not shutil.which("espeak-ng"):
        print("SKIP: the espeak-ng program is not installed (Debian package espeak-ng)")
        return 77
    base = json.load(open(args.config, encoding="utf-8"))
    id_map = base["phoneme_id_map"]
    failures = 0
    checked = 0
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for voice, texts in SENTENCES.items():
            config = os.path.join(tmp, f"{voice}.onnx.json")
            with open(config, "w", encoding="utf-8") as f:
                json.dump(dict(base, espeak={"voice": voice}), f, ensure_ascii=False)
            for text in texts:
                expected = reference_sentences(voice, text)
                got = etude_sentences(args.etude, config, text)
                cases.append((voice, text, got))
                checked += 1
                ok = len(got) == len(expected) and all(
                    g["phonemes"] == e and g["phoneme_ids"] == ids_of(e, id_map)
                    for g, e in zip(got, expected))
                if not ok:
                    failures += 1
                    print(f"FAIL {voice} {text!r}")
                    print("  expected:", ["".join(e) for e in expected])
                    print("  got:     ", ["".join(g["phonemes"]) for g in got])
    print(f"espeak-ng program reference: {checked - failures}/{checked} texts equal")
    with tempfile.TemporaryDirectory() as tmp:
        for voice, texts in PIPER_ONLY.items():
            config = os.path.join(tmp, f"{voice}.onnx.json")
            with open(config, "w", encoding="utf-8") as f:
                json.dump(dict(base, espeak={"voice": voice}), f, ensure_ascii=False)
            for text in texts:
                cases.append((voice, text, etude_sentences(args.etude, config, text)))

    if args.piper_python and os.path.exists(args.piper_python):
        probe = subprocess.run([args.piper_python, "-c", "import piper.espeakbridge"],
                               capture_output=True)
        if probe.returncode != 0:
            print("piper-tts comparison skipped: piper-tts is not installed in", args.piper_python)
        else:
            proc = subprocess.Popen([args.piper_python, "-c", PIPER_SCRIPT], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, encoding="utf-8")
            proc.stdin.write(json.dumps(base) + "\n")
            differing = 0
            for voice, text, got in cases:
                proc.stdin.write(json.dumps([voice, text]) + "\n")
                proc.stdin.flush()
                piper = [s for s in json.loads(proc.stdout.readline()) if s]
                marks = lambda s: [p for p in s if p in ".?!,:;"]
                if bounded_split(piper, got):
                    print(f"bounded: {voice} {text[:40]!r}...: piper-tts's one sentence of "
                          f"{len(piper[0])} phonemes is {len(got)} sentences here (400 at most "
                          "before a clause end)")
                    continue
                if len(piper) != len(got) or any(
                        marks(p) != marks(g["phonemes"]) for p, g in zip(piper, got)):
                    failures += 1
                    print(f"FAIL (sentences or punctuation differ from piper-tts) {voice} {text!r}")
                    print("  piper-tts:", ["".join(p) for p in piper])
                    print("  etude:    ", ["".join(g["phonemes"]) for g in got])
                    continue
                for p, g in zip(piper, got):
                    if p != g["phonemes"]:
                        differing += 1
                        print(f"espeak-ng 1.51 vs piper-tts's espeak-ng ({voice}): "
                              f"{''.join(g['phonemes'])!r} vs {''.join(p)!r}")
            proc.stdin.close()
            proc.wait()
            print(f"piper-tts: same sentences and punctuation for {len(cases)} texts; "
                  f"{differing} sentences pronounced differently by the two espeak-ng versions")
    else:
        print("piper-tts comparison skipped: no test venv (scripts/bootstrap.sh test makes it)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
