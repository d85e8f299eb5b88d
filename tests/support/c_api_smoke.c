/* Compiled as C: proves etude.h is a valid C header and that the C API
 * speaks, reports errors and cancels. Called from tests/engine/c_api_test.cpp. */
#include <stdlib.h>
#include <string.h>

#include "engine/etude.h"

/* Returns 0 on success, or the number of the first failed check. */
int etude_c_api_smoke(size_t* samples_out) {
    etude_engine* engine = NULL;
    etude_stream* stream = NULL;
    float block[512];
    size_t n, total = 0;
    etude_stream_stats stats;

    if (etude_engine_create(&engine) != ETUDE_OK) return 1;
    if (etude_stream_create(engine, "nosuchvoice", 16000, &stream) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 2;
    if (strstr(etude_last_error(), "nosuchvoice") == NULL) return 3;
    if (etude_stream_create(engine, NULL, 5000, &stream) != ETUDE_ERROR_INVALID_ARGUMENT) return 4;
    if (etude_stream_create(engine, NULL, 22050, &stream) != ETUDE_OK) return 5;
    if (etude_stream_push_text(stream, "bad \xff", -1) != ETUDE_ERROR_INVALID_TEXT) return 6;
    if (etude_stream_push_text(stream, "Hello from C. Ignored tail", 13) != ETUDE_OK) return 7;
    if (etude_stream_end_input(stream) != ETUDE_OK) return 13;
    if (etude_stream_end_input(NULL) != ETUDE_ERROR_INVALID_ARGUMENT) return 14;
    while ((n = etude_stream_read(stream, block, 512)) > 0) total += n;
    if (etude_stream_busy(stream)) return 8;
    if (etude_stream_get_stats(stream, &stats) != ETUDE_OK) return 9;
    if (stats.sentences_spoken != 1 || stats.samples_delivered != total) return 10;
    if (etude_stream_cancel(stream) != ETUDE_OK) return 11;
    if (etude_stream_push_text(NULL, "x", -1) != ETUDE_ERROR_INVALID_ARGUMENT) return 12;
    etude_stream_destroy(stream);
    etude_engine_destroy(engine);
    *samples_out = total;
    return 0;
}

/* A Piper voice from C: its description, a stream with options, phoneme
 * ids in, audio out; bad speakers and ids refused. Returns 0 or the number
 * of the first failed check. */
int etude_c_api_piper_smoke(const char* voice_path, size_t* samples_out) {
    static const int64_t ids[] = {1, 0, 20, 0, 21, 0, 22, 0, 2};
    const int64_t bad_ids[] = {1, 0, 99999, 0, 2};
    etude_engine* engine = NULL;
    etude_stream* stream = NULL;
    etude_voice_info* info = NULL;
    etude_piper_stream_options options;
    float block[512];
    size_t n, total = 0;

    if (etude_voice_info_open(voice_path, &info) != ETUDE_OK) return 101;
    if (etude_voice_info_speaker_count(info) != 4) return 102;
    if (strcmp(etude_voice_info_speaker(info, 2), "speaker_2") != 0) return 103;
    if (etude_voice_info_speaker(info, 4) != NULL) return 104;
    if (etude_voice_info_sample_rate(info) != 22050) return 105;
    if (strcmp(etude_voice_info_quality(info), "medium") != 0) return 106;
    etude_voice_info_destroy(info);
    if (etude_voice_info_open("no-such-voice", &info) != ETUDE_ERROR_INVALID_ARGUMENT) return 107;

    if (etude_engine_create(&engine) != ETUDE_OK) return 108;
    /* A data folder that is not one is refused and named, before espeak-ng
     * starts (it would search elsewhere instead). */
    if (etude_set_espeak_data(NULL) != ETUDE_ERROR_INVALID_ARGUMENT) return 170;
    if (etude_set_espeak_data("/no/such/espeak-ng-data") != ETUDE_ERROR_INVALID_ARGUMENT)
        return 171;
    if (strstr(etude_last_error(), "/no/such/espeak-ng-data") == NULL) return 172;
    if (etude_engine_preload_voice(engine, "no-such-voice") != ETUDE_ERROR_INVALID_ARGUMENT)
        return 122;
    if (strstr(etude_last_error(), "no-such-voice") == NULL) return 123;
    if (etude_engine_preload_voice(engine, NULL) != ETUDE_ERROR_INVALID_ARGUMENT) return 124;
    if (etude_engine_preload_voice(engine, voice_path) != ETUDE_OK) return 125;
    if (etude_engine_preload_voice(engine, "rms") != ETUDE_OK) return 126;
    {
        double speed = 0;
        size_t streams = 0;
        if (etude_engine_measure_capacity(engine, voice_path, 2, &speed, &streams) != ETUDE_OK)
            return 140;
        if (!(speed > 0) || streams < 1) return 141;
        if (etude_engine_measure_capacity(engine, NULL, 1, NULL, &streams) != ETUDE_OK) return 142;
        if (etude_engine_measure_capacity(engine, "rms", 33, NULL, &streams) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 143;
        if (etude_engine_measure_capacity(engine, "no-such-voice", 1, NULL, &streams) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 144;
        if (etude_engine_measure_capacity(engine, "slt", 1, NULL, NULL) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 145;
        if (etude_engine_measure_capacity(engine, "", 1, NULL, &streams) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 146;
    }
    {
        double median_ms = -1, last_ms = -1;
        if (etude_engine_measure_first_audio(engine, voice_path, 2, &median_ms, &last_ms) !=
            ETUDE_OK)
            return 160;
        /* Swapped outputs would put the last before the median. */
        if (!(median_ms > 0) || last_ms < median_ms) return 161;
        if (etude_engine_measure_first_audio(NULL, "slt", 1, NULL, &last_ms) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 167;
        if (etude_engine_measure_first_audio(engine, NULL, 1, NULL, &last_ms) != ETUDE_OK)
            return 162;
        if (etude_engine_measure_first_audio(engine, "slt", 65, NULL, &last_ms) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 163;
        if (etude_engine_measure_first_audio(engine, "slt", 0, NULL, &last_ms) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 164;
        if (etude_engine_measure_first_audio(engine, "slt", 1, NULL, NULL) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 165;
        if (etude_engine_measure_first_audio(engine, "", 1, NULL, &last_ms) !=
            ETUDE_ERROR_INVALID_ARGUMENT)
            return 166;
    }
    etude_piper_stream_options_init(&options, sizeof options);
    options.voice = voice_path;
    options.speaker = "nobody";
    if (etude_stream_create_piper(engine, &options, &stream) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 109;
    if (strstr(etude_last_error(), "nobody") == NULL) return 110;
    options.speaker = "speaker_1";
    options.seed = 9;
    options.backend = "cpu";
    if (etude_stream_create_piper(engine, &options, &stream) != ETUDE_OK) return 111;
    if (etude_stream_push_phoneme_ids(stream, bad_ids, 5) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 112;
    if (etude_stream_push_phoneme_ids(stream, ids, 9) != ETUDE_OK) return 113;
    while ((n = etude_stream_read(stream, block, 512)) > 0) total += n;
    if (total == 0 || total % 256 != 0) return 114;
    if (etude_stream_unspeakable_reason(stream, NULL, 0) != 0) return 115;
    etude_stream_destroy(stream);
    /* A sentence the network refuses says why. */
    options.length_scale = 100000.0f;
    if (etude_stream_create_piper(engine, &options, &stream) != ETUDE_OK) return 116;
    if (etude_stream_push_phoneme_ids(stream, ids, 9) != ETUDE_OK) return 117;
    while ((n = etude_stream_read(stream, block, 512)) > 0) return 118;
    {
        char reason[16];
        const size_t length = etude_stream_unspeakable_reason(stream, reason, sizeof reason);
        char* whole;
        int found;
        if (length < sizeof reason || strlen(reason) != sizeof reason - 1) return 119;
        whole = (char*)malloc(length + 1);
        if (!whole) return 120;
        found = etude_stream_unspeakable_reason(stream, whole, length + 1) == length &&
                strstr(whole, "durations add up to") != NULL;
        free(whole);
        if (!found) return 121;
    }
    etude_stream_destroy(stream);
    etude_engine_destroy(engine);
    *samples_out = total;
    return 0;
}

/* SSML from C: marks come out in order with positions inside the audio,
 * the position follows the reads, bad SSML is refused with its reason. */
int etude_c_api_ssml_smoke(size_t* samples_out) {
    etude_engine* engine = NULL;
    etude_stream* stream = NULL;
    etude_mark mark;
    float block[512];
    size_t n, total = 0, before;
    uint64_t first = 0;
    int marks = 0;

    if (etude_engine_create(&engine) != ETUDE_OK) return 201;
    if (etude_stream_create(engine, NULL, 16000, &stream) != ETUDE_OK) return 202;
    if (etude_stream_push_ssml(stream, "<speak>caf\xc3</speak>", -1) != ETUDE_ERROR_INVALID_TEXT)
        return 203;
    if (strstr(etude_last_error(), "UTF-8") == NULL) return 204;
    if (etude_stream_push_ssml(NULL, "<speak/>", -1) != ETUDE_ERROR_INVALID_ARGUMENT) return 205;
    if (etude_stream_push_ssml(stream,
                               "<speak>Hello from C.<mark name=\"one\"/><break time=\"100ms\"/>"
                               "<mark name=\"two\"/>Goodbye.</speak>",
                               -1) != ETUDE_OK)
        return 206;
    if (etude_stream_end_input(stream) != ETUDE_OK) return 207;
    while ((n = etude_stream_read(stream, block, 512)) > 0) total += n;
    if (etude_stream_position(stream) != total) return 208;
    while (etude_stream_next_mark(stream, &mark)) {
        if (mark.kind != ETUDE_MARK_NAMED) return 214; /* words were not asked for */
        ++marks;
        if (marks == 1 && (strcmp(mark.name, "one") != 0 || mark.sample == 0)) return 209;
        if (marks == 1) first = mark.sample;
        /* The 100 ms break at 16 kHz lies between the two. */
        if (marks == 2 && (strcmp(mark.name, "two") != 0 || mark.sample != first + 1600))
            return 210;
        if (mark.sample >= total) return 211;
    }
    if (marks != 2) return 212;
    if (etude_stream_next_mark(stream, NULL) != 0 || etude_stream_next_mark(NULL, &mark) != 0)
        return 213;
    /* Words once asked for: each with its kind, in order, inside the audio. */
    etude_stream_report_words(NULL, 1);
    etude_stream_report_words(stream, 1);
    if (etude_stream_push_text(stream, "Two words.", -1) != ETUDE_OK) return 215;
    if (etude_stream_end_input(stream) != ETUDE_OK) return 216;
    before = total;
    while ((n = etude_stream_read(stream, block, 512)) > 0) total += n;
    marks = 0;
    while (etude_stream_next_mark(stream, &mark)) {
        if (mark.kind != ETUDE_MARK_WORD || mark.sample < before || mark.sample >= total)
            return 217;
        if (strcmp(mark.name, marks == 0 ? "Two" : "words") != 0) return 218;
        ++marks;
    }
    if (marks != 2) return 219;
    /* Prosody: out of range refused with its reason; in range taken. */
    if (etude_stream_set_prosody(stream, 0.0f, 1.0f, 1.0f, 1.0f) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 220;
    if (strstr(etude_last_error(), "rate") == NULL) return 221;
    if (etude_stream_set_prosody(NULL, 1.0f, 1.0f, 1.0f, 1.0f) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 222;
    if (etude_stream_set_prosody(stream, 1.5f, 1.2f, 0.5f, 0.5f) != ETUDE_OK) return 223;
    if (etude_stream_set_prosody(stream, 1.0f, 1.0f, 5.0f, 1.0f) != ETUDE_ERROR_INVALID_ARGUMENT)
        return 224;
    etude_stream_destroy(stream);
    etude_engine_destroy(engine);
    *samples_out = total;
    return 0;
}
