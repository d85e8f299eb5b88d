/* jack_tts: a JACK client in plain C that speaks each line of standard input.
 *
 *   jackd -d dummy -r 48000 -p 1024 &
 *   printf 'Hello from JACK.\nA second line.\n' | jack_tts --connect
 *
 * Only two threads matter: JACK's process thread, which copies ready samples
 * out of the stream (etude_stream_pull: no allocation, locks or I/O), and the
 * main thread, which reads text and pushes it. All synthesis happens on the
 * engine's own workers, ahead of the callback. */
#define _POSIX_C_SOURCE 200809L /* sigaction, nanosleep under strict C11 */

#include <jack/jack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/etude.h"

static etude_stream* g_stream; /* set before activation, read by the process thread */
static jack_port_t* g_port;
static volatile sig_atomic_t g_stop;        /* SIGINT/SIGTERM */
static volatile sig_atomic_t g_server_gone; /* JACK shut down (seen at the next line) */

/* Real-time: one copy out of the stream; padding with silence is done by it. */
static int process(jack_nframes_t frames, void* arg) {
    (void)arg;
    float* out = jack_port_get_buffer(g_port, frames);
    etude_stream_pull(g_stream, out, frames);
    return 0;
}

static void on_shutdown(void* arg) {
    (void)arg;
    g_server_gone = 1;
}

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
    int connect = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--connect") == 0) {
            connect = 1;
        } else {
            fprintf(stderr, "usage: %s [--connect]  (text lines on standard input)\n", argv[0]);
            return 2;
        }
    }

    /* Never start a server behind the user's back: say that none is running. */
    jack_status_t status;
    jack_client_t* client = jack_client_open("jack_tts", JackNoStartServer, &status);
    if (!client) {
        const char* server = getenv("JACK_DEFAULT_SERVER"); /* libjack's own choice */
        fprintf(stderr,
                "jack_tts: no JACK server named '%s' is running (start one, e.g. "
                "'jackd -d dummy -r 48000 -p 1024')\n",
                server ? server : "default");
        return 1;
    }
    /* The engine resamples to whatever rate the server runs at. */
    const jack_nframes_t rate = jack_get_sample_rate(client);
    etude_engine* engine = NULL;
    if (etude_engine_create(&engine) != ETUDE_OK ||
        etude_stream_create(engine, "slt", rate, &g_stream) != ETUDE_OK) {
        fprintf(stderr, "jack_tts: %s\n", etude_last_error());
        etude_engine_destroy(engine);
        jack_client_close(client);
        return 1;
    }
    g_port = jack_port_register(client, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    jack_set_process_callback(client, process, NULL);
    jack_on_shutdown(client, on_shutdown, NULL);
    if (!g_port || jack_activate(client) != 0) {
        fprintf(stderr, "jack_tts: cannot register or activate the JACK client\n");
        jack_client_close(client);
        etude_stream_destroy(g_stream);
        etude_engine_destroy(engine);
        return 1;
    }
    if (connect) { /* mono speech to the first two speakers (left and right) */
        const char** ports =
            jack_get_ports(client, NULL, NULL, JackPortIsPhysical | JackPortIsInput);
        for (int i = 0; ports && ports[i] && i < 2; ++i)
            jack_connect(client, jack_port_name(g_port), ports[i]);
        jack_free(ports);
    }
    fprintf(stderr, "jack_tts: %s at %u Hz; reading lines\n", jack_port_name(g_port), rate);

    /* No SA_RESTART: Ctrl-C must interrupt the blocking read of stdin. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    char line[4096];
    while (!g_stop && !g_server_gone && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        /* Each line is a whole utterance: end its input, so that its last
         * sentence is not held back for the next line. */
        if (etude_stream_push_text(g_stream, line, -1) != ETUDE_OK ||
            etude_stream_end_input(g_stream) != ETUDE_OK)
            fprintf(stderr, "jack_tts: line not spoken: %s\n", etude_last_error());
    }
    /* End of input: let the queued speech play out, unless told to stop. */
    while (!g_stop && !g_server_gone && etude_stream_busy(g_stream)) sleep_ms(20);
    if (g_stop) { /* fade out, and give the dropped sentences a moment to be counted */
        etude_stream_cancel(g_stream);
        for (int i = 0; i < 50 && etude_stream_busy(g_stream); ++i) sleep_ms(10);
    }

    etude_stream_stats st;
    etude_stream_get_stats(g_stream, &st);
    fprintf(stderr,
            "jack_tts: %llu samples (%.2f s) of speech, sentences %llu spoken, %llu dropped, "
            "underruns %llu (%llu samples), first audio %.1f ms\n",
            (unsigned long long)st.samples_delivered, (double)st.samples_delivered / rate,
            (unsigned long long)st.sentences_spoken, (unsigned long long)st.sentences_dropped,
            (unsigned long long)st.underruns, (unsigned long long)st.underrun_samples,
            st.first_audio_ms);

    /* Close the client first: after that no callback can touch the stream. */
    if (!g_server_gone) jack_deactivate(client);
    jack_client_close(client);
    etude_stream_destroy(g_stream);
    etude_engine_destroy(engine);
    if (g_server_gone) {
        fprintf(stderr, "jack_tts: the JACK server shut down\n");
        return 1;
    }
    return 0;
}
