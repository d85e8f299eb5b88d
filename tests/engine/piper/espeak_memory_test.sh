#!/bin/sh
# espeak-ng 1.51 (Debian 12) reads and writes memory it should not on some
# text: a word that turns from Armenian, Georgian or Hangul jamo into IPA
# or Cyrillic letters ("Ճə"), and some codepoints on their own (unassigned
# ones, archaic Hangul jamo) or beside punctuation (the danda in "}।"),
# and words longer than its buffers ("s'" 80 times aborts it). The phonemizer splits such words and blanks
# such codepoints before espeak-ng sees them (engine/piper/unicode_text.h);
# this runs `etude phonemize` on the cases, one per line of its input, under
# valgrind's memcheck, which found them, and fails on any invalid read or
# write. One process for them all: each alone cost 1.5 s of CPU, nearly
# all of it valgrind starting etude. Where it fails, each case then runs
# alone to name the ones at fault (the test has failed already).
#   espeak_memory_test.sh ETUDE VOICE.onnx
etude=$1 voice=$2
if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind is not installed (apt-get install valgrind)"
    exit 77
fi
report=${TMPDIR:-/tmp}/espeak_memory.$$
memcheck() {
    valgrind -q --error-exitcode=9 --undef-value-errors=no \
        "$etude" phonemize --voice "$voice" "$@" >/dev/null 2>"$report"
}
cases=$(cat <<'CASES'
An ordinary sentence, with digits 42 and a question?
Ճə and Բɪ and ჰʃ
日本GрՃəb
ᆐə ᇐ ᇰ
՘ ֋ ֍
Price ০১২ and ੦੧ and ૦
ːՊ Պː
몞 Ε^몕'몞 ;
한'국 Ա'Ա
}।
x -॥ and "։" and -෴
"՝" and -௰ and "৴"
s's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's's'
日.&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&&@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
CASES
)
status=0
if printf '%s\n' "$cases" | memcheck; then
    printf '%s\n' "$cases" | while IFS= read -r text; do
        [ -z "$text" ] || echo "clean: $text"
    done
else
    status=1
    echo "espeak-ng touched memory it should not (the cases in one process):"
    grep -m 3 -E "Invalid (read|write)" "$report"
    printf '%s\n' "$cases" | while IFS= read -r text; do
        [ -n "$text" ] || continue
        if memcheck "$text"; then
            echo "clean alone: $text"
        else
            echo "espeak-ng touched memory it should not for: $text"
            grep -m 3 -E "Invalid (read|write)" "$report"
        fi
    done
fi
rm -f "$report"
exit $status
