// portaudio_player: speak text through PortAudio's default output device.
//
//   portaudio_player "Hello from PortAudio."
//   echo "Through JACK this time." | portaudio_player --host-api JACK
//
// The PortAudio callback below only calls Stream::pull(): it copies samples
// the engine made ahead of time and pads with silence if none are ready.
// Everything else (text analysis, vocoding, resampling) runs on the engine's
// workers. Device selection reuses the library's PortAudioSystem, so
// --host-api behaves exactly like `etude say --play --host-api`.
#include <portaudio.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>

#include "audio-io/portaudio_output.h"
#include "engine/engine.h"

using etude::engine::Stream;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_signal(int) {
    g_interrupted = true;
}

// Real-time: no allocation, locks, I/O or exceptions (pull() is noexcept).
int play_callback(const void*, void* output, unsigned long frames, const PaStreamCallbackTimeInfo*,
                  PaStreamCallbackFlags, void* user) {
    static_cast<Stream*>(user)->pull({static_cast<float*>(output), frames});
    return paContinue;
}

// Owns one PortAudio output stream: closed however main() leaves.
class PlaybackStream {
  public:
    PlaybackStream(Stream& stream, int device) {
        PaStreamParameters out{};
        out.device = device;
        out.channelCount = 1;
        out.sampleFormat = paFloat32;
        out.suggestedLatency = Pa_GetDeviceInfo(device)->defaultLowOutputLatency;
        // Let the host pick the buffer size; the engine adapts its latency
        // to whatever the callback asks for.
        check(Pa_OpenStream(&pa_, nullptr, &out, stream.sample_rate(), paFramesPerBufferUnspecified,
                            paNoFlag, play_callback, &stream));
        latency_ = Pa_GetStreamInfo(pa_)->outputLatency;
    }
    ~PlaybackStream() {
        if (pa_) Pa_CloseStream(pa_);
    }
    PlaybackStream(const PlaybackStream&) = delete;
    PlaybackStream& operator=(const PlaybackStream&) = delete;
    void start() { check(Pa_StartStream(pa_)); }
    void finish() {  // plays out what the device still buffers, then stops
        std::this_thread::sleep_for(std::chrono::duration<double>(latency_ + 0.05));
        Pa_StopStream(pa_);
    }

  private:
    static void check(PaError err) {
        if (err != paNoError) throw etude::Error(std::string("PortAudio: ") + Pa_GetErrorText(err));
    }
    PaStream* pa_ = nullptr;
    double latency_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
    std::string host_api, text;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--host-api" && i + 1 < argc) {
            host_api = argv[++i];
        } else if (arg.rfind("--", 0) == 0) {
            std::fprintf(stderr, "usage: portaudio_player [--host-api NAME] [TEXT...]\n");
            return 2;
        } else {
            text += (text.empty() ? "" : " ") + arg;
        }
    }
    if (text.empty()) text.assign(std::istreambuf_iterator<char>(std::cin), {});
    try {
        // Opening the device first means a machine without one fails in
        // milliseconds, before any voice is loaded.
        etude::audio_io::PortAudioSystem portaudio;
        const int device = portaudio.find_output_device("", host_api);  // throws if none
        const PaDeviceInfo* info = Pa_GetDeviceInfo(device);

        // Synthesise at the device's own rate: no resampling in the driver,
        // and JACK (which has exactly one rate) accepts the stream.
        etude::engine::Engine engine;
        auto stream = engine.create_stream({.sample_rate = info->defaultSampleRate});
        const std::size_t sentences = stream->push_text(text) + stream->end_input();
        if (sentences == 0) throw etude::Error("nothing to speak in the input");

        std::signal(SIGINT, on_signal);
        PlaybackStream playback(*stream, device);
        playback.start();
        std::fprintf(stderr, "portaudio_player: playing on '%s' (%s) at %.0f Hz\n", info->name,
                     Pa_GetHostApiInfo(info->hostApi)->name, info->defaultSampleRate);
        while (stream->busy() && !g_interrupted)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (g_interrupted) stream->cancel();  // fades out instead of clicking
        playback.finish();

        const auto s = stream->stats();
        std::fprintf(stderr,
                     "portaudio_player: %llu samples played, %llu underruns, sentences %llu "
                     "spoken, first audio %.1f ms, latency %.1f ms\n",
                     static_cast<unsigned long long>(s.samples_delivered),
                     static_cast<unsigned long long>(s.underruns),
                     static_cast<unsigned long long>(s.sentences_spoken), s.first_audio_ms,
                     s.latency_ms);
        return g_interrupted ? 1 : 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "portaudio_player: %s\n", e.what());
        return 1;
    }
}
