/* Which codepoints make espeak-ng read or write memory it should not, for
 * engine/piper/espeak_text_guard.cpp's table. Run under valgrind:
 *
 *   gcc -O1 espeak_scan.c -o espeak_scan -lespeak-ng
 *   valgrind -q --error-limit=no --undef-value-errors=no --log-file=/dev/null \
 *       ./espeak_scan 0080 3000 en-us alone > alone.txt
 *   (the same with "word" for each codepoint inside an English word, "dash"
 *   for each after a hyphen, "quoted" for each between double quotes; a
 *   last argument STEP scans every STEP-th codepoint, for a sample of a
 *   range too large to scan whole)
 *   python3 make_table.py alone.txt word.txt > ../../engine/piper/espeak_mishandled.inc
 *
 * espeak-ng is initialised once; each codepoint is phonemised in a fork of
 * that process, so one codepoint's damage cannot show up as the next one's.
 * A line "HEX COUNT" is printed for each codepoint whose child saw memcheck
 * errors (COUNT capped at 200). Unassigned-value errors are left out
 * (--undef-value-errors=no): espeak-ng 1.51 has many of them on ordinary
 * text. About 90 ms a codepoint under valgrind on a 2-vCPU EPYC. */
#include <espeak-ng/speak_lib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

static int utf8(unsigned c, char* o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 63));
    o[2] = (char)(0x80 | ((c >> 6) & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

int main(int argc, char** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr,
                "usage: espeak_scan FIRST_HEX END_HEX VOICE alone|word|dash|quoted [STEP]\n");
        return 2;
    }
    const unsigned first = (unsigned)strtoul(argv[1], 0, 16),
                   end = (unsigned)strtoul(argv[2], 0, 16);
    /* The text around each codepoint: "word" puts it inside an English word;
     * "dash" and "quoted" beside punctuation, which is how the clause marks
     * U+0964 (danda) and U+0589 (Armenian full stop) hurt memory ("-\u0964",
     * "\"\u0589\""), though alone they do not. */
    const char *before = "", *after = "";
    if (strcmp(argv[4], "word") == 0) {
        before = "a";
        after = "b";
    } else if (strcmp(argv[4], "dash") == 0) {
        before = "-";
    } else if (strcmp(argv[4], "quoted") == 0) {
        before = after = "\"";
    } else if (strcmp(argv[4], "alone") != 0) {
        fprintf(stderr, "espeak_scan: the context is alone, word, dash or quoted\n");
        return 2;
    }
    if (espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL, espeakINITIALIZE_DONT_EXIT) <= 0 ||
        espeak_SetVoiceByName(argv[3]) != EE_OK) {
        fprintf(stderr, "espeak-ng: cannot start voice %s\n", argv[3]);
        return 1;
    }
    const unsigned step = argc == 6 ? (unsigned)strtoul(argv[5], 0, 10) : 1;
    if (step == 0) {
        fprintf(stderr, "espeak_scan: STEP must be 1 or more\n");
        return 2;
    }
    for (unsigned c = first; c < end; c += step) {
        if (c >= 0xD800 && c < 0xE000) continue; /* surrogates are not UTF-8 */
        const pid_t pid = fork();
        if (pid == 0) {
            char text[16];
            int n = 0;
            strcpy(text, before);
            n = (int)strlen(text);
            n += utf8(c, text + n);
            strcpy(text + n, after);
            const unsigned before = VALGRIND_COUNT_ERRORS;
            const void* p = text;
            while (p) espeak_TextToPhonemes(&p, espeakCHARS_UTF8, espeakPHONEMES_IPA);
            const unsigned errors = VALGRIND_COUNT_ERRORS - before;
            _exit(errors > 200 ? 200 : (int)errors);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        const int errors = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
        if (errors) {
            printf("%04X %d\n", c, errors);
            fflush(stdout);
        }
    }
    return 0;
}
