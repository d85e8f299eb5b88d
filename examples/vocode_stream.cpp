// vocode_stream: a neural vocoder behind an acoustic model. Mel frames arrive
// in chunks, the way FastSpeech2 or Matcha-TTS would emit them, and the
// stream turns them into audio as they come; the audio goes to a WAV file.
//
//   vocode_stream tests/data/neural/hifigan_v1.lef tests/data/neural/hifigan_v1_mel.npy out.wav
//       [--chunk FRAMES] [--rate HZ] [--backend auto|cpu|cuda|opencl]
//
// The model is a LEF file made by tools/convert.py from a HiFi-GAN or Vocos
// checkpoint; the mel is float32 (n_mels, frames), natural-log magnitudes made
// the way the model was trained (docs/neural-vocoders.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/npy_file.h"
#include "audio-io/wav_writer.h"
#include "engine/engine.h"

int main(int argc, char** argv) {
    std::vector<std::string> files;
    std::size_t chunk = 8;  // frames per chunk: 8 x 256 samples is 93 ms of audio at 22050 Hz
    double rate = 0;        // 0: the model's own rate, no resampling
    std::string backend = "auto";
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            const bool has_value = i + 1 < argc;
            if (arg == "--chunk" && has_value) {
                chunk = std::max(1, std::stoi(argv[++i]));
            } else if (arg == "--rate" && has_value) {
                rate = std::stod(argv[++i]);
            } else if (arg == "--backend" && has_value) {
                backend = argv[++i];
            } else {
                files.push_back(arg);
            }
        }
        if (files.size() != 3) {
            std::fprintf(stderr,
                         "usage: vocode_stream MODEL.lef MEL.npy OUT.wav [--chunk FRAMES] "
                         "[--rate HZ] [--backend NAME]\n");
            return 2;
        }
        const auto mel = etude::audio_io::read_npy(files[1]);
        if (mel.shape.size() != 2)
            throw etude::Error(files[1] + ": expected shape (n_mels, frames)");
        const std::size_t n_mels = mel.shape[0], frames = mel.shape[1];

        // A reader that only uses read() sets no deadline, so the model makes
        // every chunk (with pull(), a late model would fall back to phase
        // reconstruction; see docs/neural-vocoders.md).
        etude::engine::Engine engine(etude::engine::Engine::Options{{}});  // no text voices needed
        auto stream =
            engine.create_stream({.voice = etude::engine::MelVoiceOptions{.model = files[0]},
                                  .sample_rate = rate,
                                  .backend = backend});
        rate = stream->sample_rate();  // with --rate 0, the model's own (its file says which)
        if (stream->mel_bands() != n_mels)
            throw etude::Error(files[1] + " has " + std::to_string(n_mels) +
                               " mel bands, the model takes " +
                               std::to_string(stream->mel_bands()));

        // The "acoustic model": hands over one chunk at a time, each laid out
        // [n_mels][chunk frames] as a network's output tensor would be.
        std::size_t chunks_pushed = 0;
        std::exception_ptr producer_error;
        std::atomic<bool> producer_done{false};
        std::thread producer([&] {
            try {
                std::vector<float> part;
                for (std::size_t first = 0; first < frames; first += chunk) {
                    const std::size_t n = std::min(chunk, frames - first);
                    part.resize(n_mels * n);
                    for (std::size_t band = 0; band < n_mels; ++band)
                        std::copy_n(mel.data.begin() + band * frames + first, n,
                                    part.begin() + band * n);
                    stream->push_mel(part, n,
                                     /*last=*/first + n == frames);  // last flushes the context
                    ++chunks_pushed;
                }
            } catch (...) {
                producer_error = std::current_exception();
                stream->cancel();
            }
            producer_done = true;
        });

        // The consumer: a file here, so the blocking read(); an audio
        // callback would call pull() instead. read() waits while an utterance
        // is open (until its `last` chunk) and returns 0 when all of it has
        // been delivered; it can also return 0 before the first chunk is in.
        etude::audio_io::WavWriter wav(files[2], static_cast<int>(rate));
        std::vector<float> block(4096);
        for (;;) {
            const bool all_pushed = producer_done.load();  // before read(), so nothing is missed
            const std::size_t n = stream->read(block);
            wav.write(std::span(block).first(n));
            if (n == 0 && all_pushed) break;
            if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        producer.join();
        if (producer_error) std::rethrow_exception(producer_error);
        wav.commit();

        const auto s = stream->stats();
        std::printf("%s: %zu chunks of up to %zu frames, %llu frames vocoded\n", s.model.c_str(),
                    chunks_pushed, chunk, static_cast<unsigned long long>(s.mel_frames));
        std::printf(
            "tiers: %llu chunks on the GPU, %llu on the CPU, %llu by phase reconstruction\n",
            static_cast<unsigned long long>(s.mel_chunks_gpu),
            static_cast<unsigned long long>(s.mel_chunks_cpu),
            static_cast<unsigned long long>(s.mel_chunks_phase));
        std::printf("model latency %.1f ms; wrote %zu samples at %.0f Hz to %s\n",
                    s.model_latency_ms, wav.frames_written(), rate, files[2].c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vocode_stream: %s\n", e.what());
        return 1;
    }
}
