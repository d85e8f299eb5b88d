/* LibEtude C API: streaming speech synthesis for embedding and for other
 * languages. A thin layer over the C++ etude::engine::Engine and Stream.
 *
 * Errors: functions return ETUDE_OK (0) or a negative etude_status; the
 * message of the last error on the calling thread is etude_last_error().
 * Threads: etude_stream_pull() is the real-time entry point (no allocation,
 * locks or I/O; call it from one thread, e.g. an audio callback). Everything
 * else may be called from any non-real-time thread. */
#ifndef ETUDE_H
#define ETUDE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum etude_status {
    ETUDE_OK = 0,
    ETUDE_ERROR_INVALID_ARGUMENT = -1, /* unknown voice, bad rate, NULL pointer */
    ETUDE_ERROR_INVALID_TEXT = -2,     /* e.g. text that is not UTF-8 */
    ETUDE_ERROR_INTERNAL = -3
} etude_status;

typedef struct etude_engine etude_engine;
typedef struct etude_stream etude_stream;

typedef struct etude_stream_stats {
    uint64_t samples_delivered;
    uint64_t underruns;
    uint64_t underrun_samples;
    uint64_t sentences_queued;
    uint64_t sentences_spoken;
    uint64_t sentences_dropped;
    uint64_t frames_vocoded;
    uint64_t cancels;
    double first_audio_ms;
} etude_stream_stats;

/* Message of the last failed call on this thread ("" if none). */
const char* etude_last_error(void);
const char* etude_version(void);

etude_status etude_engine_create(etude_engine** out);
void etude_engine_destroy(etude_engine* engine);

/* voice: "slt" (NULL means "slt"), "rms" or "awb"; sample_rate 8000..192000. */
etude_status etude_stream_create(etude_engine* engine, const char* voice, double sample_rate,
                                 etude_stream** out);
/* A mel stream: vocodes log-mel frames from an upstream acoustic model with
 * a neural vocoder (a LEF file made by tools/convert.py). backend: "auto"
 * (NULL means "auto"), "cpu", "cuda" or "opencl" (where the GPU tier runs);
 * sample_rate 8000..192000 (the output is resampled from the model's rate). */
etude_status etude_stream_create_mel(etude_engine* engine, const char* model_path,
                                     const char* backend, double sample_rate,
                                     etude_stream** out);
void etude_stream_destroy(etude_stream* stream);
/* Mel streams only: queues `frames` log-mel frames laid out [n_mels][frames]
 * (row-major, as PyTorch holds a mel). last != 0 ends the utterance (the
 * vocoder flushes its look-ahead); frames may then be 0. */
etude_status etude_stream_push_mel(etude_stream* stream, const float* mel, size_t n_mels,
                                   size_t frames, int last);

/* Queues UTF-8 text (length bytes; length -1 means NUL-terminated). */
etude_status etude_stream_push_text(etude_stream* stream, const char* text, ptrdiff_t length);

/* Real-time: fills out[0..frames) and returns how many samples were speech;
 * the rest is silence. */
size_t etude_stream_pull(etude_stream* stream, float* out, size_t frames);

/* Blocking read for offline use; returns 0 when all queued speech is delivered. */
size_t etude_stream_read(etude_stream* stream, float* out, size_t frames);

/* Stops speaking within one pull with a short fade and drops queued text. */
etude_status etude_stream_cancel(etude_stream* stream);
int etude_stream_busy(const etude_stream* stream);
etude_status etude_stream_get_stats(const etude_stream* stream, etude_stream_stats* out);

#ifdef __cplusplus
}
#endif
#endif /* ETUDE_H */
