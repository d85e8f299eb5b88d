/** \file
 * LibEtude C API: streaming speech synthesis for embedding and for other
 * languages. A thin layer over the C++ etude::engine::Engine and Stream.
 *
 * Errors: functions return ETUDE_OK (0) or a negative etude_status; the
 * message of the last error on the calling thread is etude_last_error().
 * Threads: etude_stream_pull() is the real-time entry point (no allocation,
 * locks or I/O; call it from one thread, e.g. an audio callback). Everything
 * else may be called from any non-real-time thread.
 * Lifetimes: destroy every stream before the engine that made it. */
#ifndef ETUDE_H
#define ETUDE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What a call returns: ETUDE_OK or a negative error; the message is in
 * etude_last_error(). */
typedef enum etude_status {
    ETUDE_OK = 0,                      /**< success */
    ETUDE_ERROR_INVALID_ARGUMENT = -1, /**< unknown voice, bad rate, NULL pointer */
    ETUDE_ERROR_INVALID_TEXT = -2,     /**< e.g. text that is not UTF-8 */
    ETUDE_ERROR_INTERNAL = -3          /**< anything else (out of memory, a library fault) */
} etude_status;

/** An engine: the voices and the worker threads its streams share. Opaque;
 * made by etude_engine_create(), freed by etude_engine_destroy(). Threads
 * do not survive fork(): in a process forked after an engine or stream was
 * made, the calls that would wait for its threads return
 * ETUDE_ERROR_INVALID_ARGUMENT instead; make an engine in the child. */
typedef struct etude_engine etude_engine;
/** A stream: text (or mel frames) in, audio out at one rate. Opaque; made by
 * etude_stream_create() or etude_stream_create_mel(), freed by
 * etude_stream_destroy(). */
typedef struct etude_stream etude_stream;

/** A snapshot of a stream's counters (a subset of the C++ StreamStats). */
typedef struct etude_stream_stats {
    uint64_t samples_delivered; /**< output samples handed out by pull/read */
    uint64_t underruns;         /**< pull calls that had to pad speech with silence */
    uint64_t underrun_samples;  /**< samples of silence padded inside speech */
    uint64_t sentences_queued;  /**< sentences queued by push_text */
    uint64_t sentences_spoken;  /**< sentences whose audio was delivered in full */
    uint64_t sentences_dropped; /**< not spoken: cancelled, or nothing speakable in them */
    uint64_t frames_vocoded;    /**< 5 ms parameter frames turned into audio */
    uint64_t cancels;           /**< etude_stream_cancel() calls */
    double first_audio_ms;      /**< push to first sample ready, last utterance (-1: none yet) */
} etude_stream_stats;

/** Message of the last failed call on this thread ("" if none). Valid until
 * the next call into the library on this thread. */
const char* etude_last_error(void);
/** The library's version, e.g. "0.1.0". */
const char* etude_version(void);

/** Makes an engine and loads the default voice.
 * \param out receives the engine (NULL on failure) */
etude_status etude_engine_create(etude_engine** out);
/** Frees an engine and stops its workers; NULL is ignored. Destroy its
 * streams first. */
void etude_engine_destroy(etude_engine* engine);
/** Loads a voice now rather than when its first stream is made, and keeps it
 * for the engine's life: a built-in voice ("slt", "rms", "awb") or a Piper
 * voice (named as etude_piper_stream_options::voice). For a Piper voice this
 * also makes its default speaker's network ready to stream and finds the
 * compute devices, so that its first stream starts as fast as later ones
 * (without it, a medium voice's first stream took about 0.2 s longer).
 * \param engine the engine that keeps the voice
 * \param voice the voice
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a NULL argument or a voice that is
 *         unknown or malformed (the message names the file and field) */
etude_status etude_engine_preload_voice(etude_engine* engine, const char* voice);
/** Where espeak-ng, which turns Piper voices' text into phonemes, reads its
 * data (etude::engine::Engine::set_espeak_data): `folder` is an
 * espeak-ng-data folder, with phontab in it. Without this call espeak-ng
 * searches as it always does (ESPEAK_DATA_PATH, ~/espeak-ng-data, then the
 * folder built into the library). Process-wide, as espeak-ng's state is:
 * call it before the first Piper voice loads. A program that ships its own
 * copy of libespeak-ng names the data that matches it here.
 * \param folder the espeak-ng-data folder
 * \return ETUDE_ERROR_INVALID_ARGUMENT for NULL, a folder without phontab,
 *         a folder other than the data espeak-ng has already started on, or
 *         a build without espeak-ng (etude_last_error() says which) */
etude_status etude_set_espeak_data(const char* folder);
/** How many real-time streams this machine holds with a voice, as `etude
 * serve` measures it at start, for streams made with the defaults
 * (etude_stream_create at 16 kHz for a built-in voice;
 * etude_piper_stream_options_init's for a Piper voice: its own rate,
 * default speaker, backend "auto"): `at_once` streams speak a two-sentence reply
 * together, each read as it is made, and their aggregate speed less a fifth (at
 * least 1) is the answer. Where a Piper voice's decoder runs on a GPU, its
 * batch cost is measured instead and the answer is the smaller of what the
 * GPU carries and what the host's text analysis on `at_once` threads carries
 * (Engine::measure_capacity() in engine.h; `speed` is then the smaller of
 * their speeds). About a second for a Piper medium voice; loads the voice if
 * it is not yet.
 * \param engine the engine to measure
 * \param voice a built-in voice ("slt"; NULL means "slt"; "rms", "awb") or
 *        a Piper voice (named as etude_piper_stream_options::voice)
 * \param at_once streams spoken at once, 1..32; 0: one per CPU the process
 *        may use (2 to 32)
 * \param speed receives their aggregate speed, seconds of speech per second
 *        (may be NULL)
 * \param streams receives the real-time streams to admit at once
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a NULL engine or streams, an
 *         at_once outside 0..32, or a voice that is empty, unknown or
 *         malformed */
etude_status etude_engine_measure_capacity(etude_engine* engine, const char* voice, int at_once,
                                           double* speed, size_t* streams);
/** How soon each of `at_once` streams of a voice (made as for
 * etude_engine_measure_capacity) is heard when all start at once: each
 * speaks the same reply, read as it is made, and the time from their common
 * start to each one's first audio is taken; once all have been heard, all
 * stop. With `at_once` the capacity, the last is the first audio a server
 * admitting that many can promise (`etude serve` logs it). Takes about as
 * long as that last first audio; loads the voice if it is not yet.
 * \param engine the engine to measure
 * \param voice as for etude_engine_measure_capacity
 * \param at_once streams started together, 1..64
 * \param median_ms receives the median of their first audios, in
 *        milliseconds from the start (may be NULL)
 * \param last_ms receives the last of them
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a NULL engine or last_ms,
 *         at_once outside 1..64, or a voice that is empty, unknown or
 *         malformed */
etude_status etude_engine_measure_first_audio(etude_engine* engine, const char* voice, int at_once,
                                              double* median_ms, double* last_ms);

/** Makes a text stream.
 * \param engine the engine whose workers it uses
 * \param voice "slt" (NULL means "slt"), "rms" or "awb"
 * \param sample_rate output rate, 8000..192000 Hz
 * \param out receives the stream (NULL on failure)
 * \return ETUDE_ERROR_INVALID_ARGUMENT for an unknown voice, a bad rate or a
 *         NULL engine or out */
etude_status etude_stream_create(etude_engine* engine, const char* voice, double sample_rate,
                                 etude_stream** out);
/** A mel stream: vocodes log-mel frames from an upstream acoustic model with
 * a neural vocoder.
 * \param engine the engine whose workers it uses
 * \param model_path a LEF file made by tools/convert.py
 * \param backend where the GPU tier runs: "auto" (NULL means "auto"), "cpu",
 *        "cuda", "vulkan" or "opencl"
 * \param sample_rate output rate, 8000..192000 Hz (resampled from the
 *        model's rate)
 * \param out receives the stream (NULL on failure) */
etude_status etude_stream_create_mel(etude_engine* engine, const char* model_path,
                                     const char* backend, double sample_rate, etude_stream** out);
/** Who waits for a stream's audio, which says how its work is scheduled
 * (etude::engine::SchedulingClass). Today network and offline are scheduled
 * alike. */
typedef enum etude_scheduling {
    ETUDE_SCHEDULING_LIVE = 0,    /**< heard as it is made: real-time workers (the default) */
    ETUDE_SCHEDULING_NETWORK = 1, /**< sent as made to a client that buffers (a server's) */
    ETUDE_SCHEDULING_OFFLINE = 2  /**< read as fast as it comes (a file, a benchmark) */
} etude_scheduling;

/** Everything a mel stream can be made with (etude_stream_create_mel_ex()).
 * Each field is the C++ field of the same meaning, of StreamOptions or
 * MelVoiceOptions (the table of engine/stream_options.h, which fills and
 * reads it).
 * Fill it with etude_mel_stream_options_init(&options, sizeof options) and
 * then set what you need. Later versions may add fields at the end: the
 * size the caller was compiled with travels in struct_size, so the library
 * never reads or writes past the caller's struct. */
typedef struct etude_mel_stream_options {
    /** sizeof(etude_mel_stream_options) where the caller was compiled; set by
     * etude_mel_stream_options_init(). */
    size_t struct_size;
    /** A LEF file made by tools/convert.py (required). */
    const char* model_path;
    /** Where model_path runs: "auto" (the default; a GPU if there is one),
     * "cpu", "cuda", "vulkan" or "opencl". */
    const char* backend;
    /** Device index within backend; -1 (the default) picks the best. */
    int device;
    /** Optional: a cheaper model of the same family and mel settings for the
     * CPU tier, e.g. HiFi-GAN V3 while V1 runs on the GPU. NULL (the default)
     * runs model_path on the CPU too. Without a GPU only this model runs. */
    const char* cpu_model_path;
    /** Nonzero (the default): when no model keeps up, the stream may fall to
     * phase reconstruction from the mel rather than underrun. */
    int allow_phase_fallback;
    /** Output rate, 8000..192000 Hz (resampled from the model's); default 48000. */
    double sample_rate;
    /** Who waits for the audio (default ETUDE_SCHEDULING_LIVE). Added
     * later than the others: a caller whose struct ends before it gets live. */
    etude_scheduling scheduling;
} etude_mel_stream_options;

/** Sets struct_size and every field to its default (model_path NULL).
 * \param options the struct to fill
 * \param struct_size sizeof *options, as the caller was compiled */
void etude_mel_stream_options_init(etude_mel_stream_options* options, size_t struct_size);
/** A mel stream with tiers: etude_stream_create_mel() with every option.
 * \param engine the engine whose workers it uses
 * \param options see etude_mel_stream_options
 * \param out receives the stream (NULL on failure)
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a NULL argument, a missing or
 *         invalid model, a bad backend name or rate, or a CPU model that
 *         cannot stand in for the main one (another family or mel setting) */
etude_status etude_stream_create_mel_ex(etude_engine* engine,
                                        const etude_mel_stream_options* options,
                                        etude_stream** out);
/** Everything a Piper stream can be made with (etude_stream_create_piper()).
 * Fill it with etude_piper_stream_options_init(&options, sizeof options),
 * then set what you need; struct_size works as for etude_mel_stream_options,
 * and each field is the C++ field of the same meaning, of StreamOptions or
 * PiperVoiceOptions. */
typedef struct etude_piper_stream_options {
    /** sizeof(etude_piper_stream_options) where the caller was compiled. */
    size_t struct_size;
    /** A Piper voice (required): PATH/VOICE.onnx with VOICE.onnx.json beside
     * it, the .json, or a voice's name in the voice folders (ETUDE_VOICE_PATH,
     * then ~/.local/share/libetude/voices). */
    const char* voice;
    /** A speaker by name or id; NULL (the default): the voice's default. */
    const char* speaker;
    /** The prior's noise; a negative value (the default, -1) keeps the
     * voice's own, as for the next two. */
    float noise_scale;
    /** The speaking pace (larger: slower). */
    float length_scale;
    /** The durations' noise. */
    float noise_w;
    /** Seeds the stream's noise: the same seed and text give the same audio. */
    uint64_t seed;
    /** Where the decoder's GPU tier runs: "auto" (the default), "cpu",
     * "cuda", "vulkan" or "opencl". */
    const char* backend;
    /** Device index within backend; -1 (the default) picks the best. */
    int device;
    /** Output rate, 8000..192000 Hz; 0 (the default): the voice's own. */
    double sample_rate;
    /** The latency budget, 5..10000 ms (default 100). */
    double latency_ms;
    /** Who waits for the audio (default ETUDE_SCHEDULING_LIVE). Added
     * later than the others: a caller whose struct ends before it gets live. */
    etude_scheduling scheduling;
    /** Silence between sentences, 0..60000 ms (Piper's --sentence-silence),
     * before each sentence that follows another of the same input; default 0.
     * Added later: a caller whose struct ends before it gets none. */
    double sentence_silence_ms;
} etude_piper_stream_options;

/** Sets struct_size and every field to its default (voice NULL).
 * \param options the struct to fill
 * \param struct_size sizeof *options, as the caller was compiled */
void etude_piper_stream_options_init(etude_piper_stream_options* options, size_t struct_size);

/** A Piper stream: text is spoken with a Piper voice (VITS), streamed
 * within the sentence.
 * \param engine the engine whose workers it uses
 * \param options see etude_piper_stream_options
 * \param out receives the stream (NULL on failure)
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a NULL argument, a voice that is
 *         missing or malformed (the message names the file and field), an
 *         unknown speaker, a bad scale, backend or rate */
etude_status etude_stream_create_piper(etude_engine* engine,
                                       const etude_piper_stream_options* options,
                                       etude_stream** out);

/** Piper streams only: queues one sentence as the voice's phoneme ids.
 * \return ETUDE_ERROR_INVALID_ARGUMENT for another stream, no ids or an id
 *         outside the voice's symbols */
etude_status etude_stream_push_phoneme_ids(etude_stream* stream, const int64_t* ids, size_t count);

/** A voice's description: a Piper voice read from its files, made by
 * etude_voice_info_open() and freed by etude_voice_info_destroy(), or one
 * voice of an etude_voice_list. Opaque. */
typedef struct etude_voice_info etude_voice_info;

/** Reads the Piper voice `voice` names (as etude_piper_stream_options::voice).
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a missing or malformed voice */
etude_status etude_voice_info_open(const char* voice, etude_voice_info** out);
/** Frees a voice description; NULL is ignored. */
void etude_voice_info_destroy(etude_voice_info* info);
/** The voice's name ("en_US-joe-medium"); lives as long as info. */
const char* etude_voice_info_name(const etude_voice_info* info);
/** The voice's language code ("en_US"); lives as long as info. */
const char* etude_voice_info_language(const etude_voice_info* info);
/** The voice's quality: "x_low", "low", "medium", "high" or "unknown". */
const char* etude_voice_info_quality(const etude_voice_info* info);
/** The voice's own sample rate in Hz. */
int etude_voice_info_sample_rate(const etude_voice_info* info);
/** The number of speakers (1 for a single-speaker voice). */
size_t etude_voice_info_speaker_count(const etude_voice_info* info);
/** Speaker `id`'s name (its number where the voice names none); NULL for an
 * id out of range. */
const char* etude_voice_info_speaker(const etude_voice_info* info, size_t id);
/** Nonzero for a built-in voice (etude_stream_options::voice), zero for a
 * Piper voice (etude_piper_stream_options::voice). */
int etude_voice_info_is_builtin(const etude_voice_info* info);
/** A Piper voice's .onnx file; "" for a built-in voice. Lives as long as
 * info. */
const char* etude_voice_info_model_path(const etude_voice_info* info);

/** Every voice the engine knows, as the C++ API's Engine::list_voices()
 * gives them. Opaque; made by etude_voice_list_open(), freed by
 * etude_voice_list_destroy(). */
typedef struct etude_voice_list etude_voice_list;

/** Lists the voices: the built-in ones ("slt", the default, first), then
 * the Piper voices of the voice folders (ETUDE_VOICE_PATH, then the
 * per-user folder), each described from its config; a voice whose config
 * cannot be read is left out.
 * \return ETUDE_ERROR_INVALID_ARGUMENT when out is NULL */
etude_status etude_voice_list_open(etude_voice_list** out);
/** Frees a voice list and the descriptions it holds; NULL is ignored. */
void etude_voice_list_destroy(etude_voice_list* list);
/** How many voices the list holds (0 for NULL). */
size_t etude_voice_list_count(const etude_voice_list* list);
/** Voice `index` of the list, read with the etude_voice_info_ functions;
 * lives as long as the list (never pass it to etude_voice_info_destroy()).
 * NULL for an index out of range. */
const etude_voice_info* etude_voice_list_voice(const etude_voice_list* list, size_t index);

/** Frees a stream; NULL is ignored. Stop the audio callback that pulls from
 * it first. */
void etude_stream_destroy(etude_stream* stream);
/** Mel streams only: queues log-mel frames.
 * \param stream a stream from etude_stream_create_mel()
 * \param mel n_mels * frames values laid out [n_mels][frames] (row-major, as
 *        PyTorch holds a mel); may be NULL when frames is 0
 * \param n_mels mel bands per frame; must be the model's
 * \param frames frames in this chunk, any number
 * \param last nonzero ends the utterance (the vocoder flushes its
 *        look-ahead); frames may then be 0
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a text stream, a wrong band count
 *         or a value that is not finite */
etude_status etude_stream_push_mel(etude_stream* stream, const float* mel, size_t n_mels,
                                   size_t frames, int last);

/** Adds UTF-8 text to the stream's input, spoken after what is already
 * queued. Text may come in pieces cut anywhere (a language model's tokens,
 * even inside a word or a character): the last sentence is held back until
 * more text completes it or etude_stream_end_input() ends the input, so
 * call that after the last piece (etude_stream_read() waits for it). Text
 * with nothing speakable is accepted and ignored.
 * \param stream a text stream
 * \param text the text (need not be NUL-terminated when length >= 0)
 * \param length its length in bytes; -1 means NUL-terminated
 * \return ETUDE_ERROR_INVALID_TEXT if the stream refuses the text (not
 *         UTF-8, or a mel stream) */
etude_status etude_stream_push_text(etude_stream* stream, const char* text, ptrdiff_t length);

/** Adds an SSML document (UTF-8) to the stream's input: its text as
 * etude_stream_push_text() takes text, each `<break>` as silence, and each
 * `<mark name="..."/>` as a mark that etude_stream_next_mark() hands out with
 * the sample position where it is heard. A mark or break ends the sentence
 * before it. Text that is not well-formed XML is spoken as plain text,
 * keeping the marks and breaks a lenient reading finds. Call
 * etude_stream_end_input() after the last document.
 * \param stream a text or Piper stream
 * \param ssml the document (need not be NUL-terminated when length >= 0)
 * \param length its length in bytes; -1 means NUL-terminated
 * \return ETUDE_ERROR_INVALID_TEXT for invalid UTF-8, a mark name longer
 *         than ETUDE_MARK_NAME_MAX bytes, or a mel stream; nothing is then
 *         queued */
etude_status etude_stream_push_ssml(etude_stream* stream, const char* ssml, ptrdiff_t length);

/** The text pushed from now on is spoken at `rate` (0.1..10, times the
 * voice's pace), `pitch` (0.5..2, times its F0), `range` (0..4, times its
 * F0's spread about its mean; pitch and range: built-in voices only) and
 * `volume` (0..4, times its amplitude); all 1 is the voice as it is. It
 * ends the sentence held before it. SSML's `<prosody>` applies within it.
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a value out of range, a mel
 *         stream or a NULL stream. */
etude_status etude_stream_set_prosody(etude_stream* stream, float rate, float pitch, float range,
                                      float volume);

/** Longest mark name, in bytes. */
#define ETUDE_MARK_NAME_MAX 63

/** etude_mark::kind: an SSML `<mark>`; its name is the mark's. */
#define ETUDE_MARK_NAMED 0
/** etude_mark::kind: a written word starts (etude_stream_report_words());
 * its name is the word, cut at ETUDE_MARK_NAME_MAX bytes. */
#define ETUDE_MARK_WORD 1

/** A mark reached in a stream's speech. */
typedef struct etude_mark {
    char name[ETUDE_MARK_NAME_MAX + 1]; /**< NUL-terminated */
    uint64_t sample; /**< where it is heard: compare with etude_stream_position() */
    int kind;        /**< ETUDE_MARK_NAMED or ETUDE_MARK_WORD */
} etude_mark;

/** Also hand out each written word's start as a mark of kind ETUDE_MARK_WORD,
 * for the text pushed after it (`on` nonzero), or stop (0). Off by default.
 * Built-in voices name Flite's tokens; a Piper voice pairs the text's words
 * with espeak-ng's and gives a sentence no word marks where they cannot be
 * paired. Mel streams have no words. Does nothing if stream is NULL. */
void etude_stream_report_words(etude_stream* stream, int on);

/** Real-time (no allocation, lock or wait): the next mark the stream's
 * speech has reached, in order. Returns 1 and fills `mark`, or 0 when there
 * is none yet (or stream or mark is NULL). Marks of speech dropped by a
 * cancel are skipped. */
int etude_stream_next_mark(etude_stream* stream, etude_mark* mark);

/** Real-time, the consumer's thread: samples of the stream's audio consumed
 * by pull or read so far (padding excluded). 0 if stream is NULL. */
uint64_t etude_stream_position(const etude_stream* stream);

/** Ends the text input: the sentence held back is queued; text pushed
 * afterwards starts a new input.
 * \return ETUDE_ERROR_INVALID_TEXT when the input ends inside a UTF-8
 *         character (push its rest, or cancel) */
etude_status etude_stream_end_input(etude_stream* stream);

/** Real-time: fills out[0..frames) and returns how many samples were speech;
 * the rest is silence. Returns 0 and writes nothing if stream or out is NULL. */
size_t etude_stream_pull(etude_stream* stream, float* out, size_t frames);

/** Blocking read for offline use: waits for audio and fills out[0..frames).
 * Returns the number of samples written, 0 when all queued speech is
 * delivered and no text is held back (or on an error, which
 * etude_last_error() then names). */
size_t etude_stream_read(etude_stream* stream, float* out, size_t frames);

/** Stops speaking within one pull with a short fade and drops queued and
 * held text. */
etude_status etude_stream_cancel(etude_stream* stream);
/** Nonzero while text is queued or audio is not yet delivered; 0 for NULL. */
int etude_stream_busy(const etude_stream* stream);
/** Copies the stream's counters into *out. */
etude_status etude_stream_get_stats(const etude_stream* stream, etude_stream_stats* out);
/** Why the voice's network refused the stream's last unspeakable sentence
 * (e.g. "VITS: the durations add up to ... frames"), copied into buf as a
 * NUL-terminated string cut to `size` bytes (buf may be NULL when size is
 * 0). Returns the reason's full length without the NUL: 0 when no sentence
 * was refused (or the front end only found nothing to pronounce), or for a
 * NULL stream. */
size_t etude_stream_unspeakable_reason(const etude_stream* stream, char* buf, size_t size);

/** A mel stream's counters: which tier made its chunks. */
typedef struct etude_mel_stats {
    uint64_t frames;         /**< mel frames vocoded */
    uint64_t chunks_gpu;     /**< chunks made by the model on the GPU */
    uint64_t chunks_cpu;     /**< chunks made by the (CPU) model on the CPU */
    uint64_t chunks_phase;   /**< chunks made by phase reconstruction */
    uint64_t gpu_failures;   /**< device errors; each chunk was remade on the CPU */
    double model_latency_ms; /**< the look-ahead the network adds */
} etude_mel_stats;
/** Copies a mel stream's tier counters into *out.
 * \return ETUDE_ERROR_INVALID_ARGUMENT for a text stream or a NULL argument */
etude_status etude_stream_get_mel_stats(const etude_stream* stream, etude_mel_stats* out);

#ifdef __cplusplus
}
#endif
#endif /* ETUDE_H */
