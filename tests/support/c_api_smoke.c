/* Compiled as C: proves etude.h is a valid C header and that the C API
 * speaks, reports errors and cancels. Called from tests/engine/c_api_test.cpp. */
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
