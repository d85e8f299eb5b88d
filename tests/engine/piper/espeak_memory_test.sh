#!/bin/sh
# espeak-ng 1.51 (Debian 12) reads and writes memory it should not on some
# text: a word that turns from Armenian, Georgian or Hangul jamo into IPA
# or Cyrillic letters ("Ճə"), and some codepoints on their own (unassigned
# ones, archaic Hangul jamo) or beside punctuation (the danda in "}।"),
# and words longer than its buffers ("s'" 80 times aborts it). The phonemizer splits such words and blanks
# such codepoints before espeak-ng sees them (engine/piper/unicode_text.h);
# this runs `etude phonemize` on each case under valgrind's memcheck, which
# found them, and fails on any invalid read or write.
#   espeak_memory_test.sh ETUDE VOICE.onnx
etude=$1 voice=$2
if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind is not installed (apt-get install valgrind)"
    exit 77
fi
status=0
while IFS= read -r text; do
    [ -n "$text" ] || continue
    if ! valgrind -q --error-exitcode=9 --undef-value-errors=no \
        "$etude" phonemize --voice "$voice" "$text" >/dev/null 2>"${TMPDIR:-/tmp}/espeak_memory.$$"; then
        echo "espeak-ng touched memory it should not for: $text"
        grep -m 3 -E "Invalid (read|write)" "${TMPDIR:-/tmp}/espeak_memory.$$"
        status=1
    else
        echo "clean: $text"
    fi
done <<'CASES'
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
rm -f "${TMPDIR:-/tmp}/espeak_memory.$$"
exit $status
