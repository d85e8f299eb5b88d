// assistant: how a voice assistant embeds LibEtude. A dialogue script on
// standard input drives one stream while an "audio device" (a thread that
// pulls one period at a time, on the clock) plays it:
//
//   say TEXT    start speaking a reply (queued after what is still playing)
//   sleep MS    let time pass (the user listens)
//   heard       wait until the user hears the last reply begin
//   barge       the user interrupts: cancel() fades out within one period
//               and drops the rest of the reply, so the next `say` starts at once
//   wait        wait until everything queued has been played
//
//   printf 'say Sure, here is a long answer. It goes on.\nsleep 800\nbarge\nsay Okay.\n'
//       | assistant -o played.wav
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "audio-io/wav_writer.h"
#include "engine/engine.h"

using namespace std::chrono;
using etude::engine::Stream;

// Stands in for a sound card: every period it asks the stream for exactly one
// period of audio, as a real callback would. Between its sleeps it never
// allocates, locks or blocks; what it "plays" goes into memory reserved up
// front.
class SimulatedDevice {
  public:
    SimulatedDevice(Stream& stream, double seconds_to_keep)
        : stream_(stream), period_(static_cast<std::size_t>(stream.sample_rate() / 100)) {
        played_.reserve(static_cast<std::size_t>(seconds_to_keep * stream.sample_rate()));
        thread_ = std::thread([this] { run(); });
    }
    ~SimulatedDevice() { stop(); }
    void stop() {
        running_ = false;
        if (thread_.joinable()) thread_.join();
    }
    std::uint64_t speech_samples() const { return speech_samples_.load(); }
    std::vector<float> take_played() {  // what went "out of the speaker"
        stop();
        return std::move(played_);
    }

  private:
    void run() {
        std::vector<float> block(period_);  // 10 ms, like a small audio buffer
        const auto period = duration<double>(static_cast<double>(period_) / stream_.sample_rate());
        auto next = steady_clock::now();
        while (running_) {
            const std::size_t speech = stream_.pull(block);  // the real-time call
            speech_samples_ += speech;
            if (played_.size() + block.size() <= played_.capacity())
                played_.insert(played_.end(), block.begin(), block.end());
            next += duration_cast<steady_clock::duration>(period);
            std::this_thread::sleep_until(next);
        }
    }
    Stream& stream_;
    std::size_t period_;
    std::vector<float> played_;
    std::atomic<std::uint64_t> speech_samples_{0};
    std::atomic<bool> running_{true};
    std::thread thread_;
};

int main(int argc, char** argv) {
    std::string wav_path;
    double rate = 16000;
    try {
        for (int i = 1; i < argc; i += 2) {
            const std::string opt = argv[i];
            if (i + 1 < argc && opt == "-o") {
                wav_path = argv[i + 1];
            } else if (i + 1 < argc && opt == "--rate") {
                rate = std::stod(argv[i + 1]);
            } else {
                std::fprintf(stderr, "usage: assistant [-o PLAYED.wav] [--rate HZ] < script\n");
                return 2;
            }
        }
        etude::engine::Engine engine;
        auto stream = engine.create_stream({.sample_rate = rate});
        std::vector<std::uint64_t> reply_start;  // device speech counter when each reply began
        std::vector<float> played;               // the whole timeline, silence included
        {
            SimulatedDevice device(*stream, wav_path.empty() ? 0.0 : 300.0);
            auto wait_until_played = [&] {
                while (stream->busy()) std::this_thread::sleep_for(milliseconds(10));
            };
            std::string line;
            while (std::getline(std::cin, line)) {
                const auto space = line.find(' ');
                const std::string verb = line.substr(0, space);
                const std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
                if (verb == "say") {
                    reply_start.push_back(device.speech_samples());
                    stream->push_text(arg);
                    stream->end_input();  // the whole reply is here
                } else if (verb == "barge") {
                    stream->cancel();  // no waiting: the next reply may be pushed right away
                    std::printf("barge-in during reply %zu\n", reply_start.size());
                } else if (verb == "sleep") {
                    std::this_thread::sleep_for(milliseconds(std::stoi(arg)));
                } else if (verb == "heard") {
                    while (!reply_start.empty() && device.speech_samples() == reply_start.back())
                        std::this_thread::sleep_for(milliseconds(1));
                } else if (verb == "wait") {
                    wait_until_played();
                } else if (!verb.empty()) {
                    std::fprintf(stderr, "assistant: unknown command '%s'\n", verb.c_str());
                    return 2;
                }
            }
            wait_until_played();
            // Each reply's share of the speech the device played: from its
            // `say` to the next one (so a cancelled reply's 5 ms fade-out,
            // played after the next `say`, may count toward the next).
            reply_start.push_back(device.speech_samples());
            for (std::size_t r = 0; r + 1 < reply_start.size(); ++r)
                std::printf("reply %zu: %llu samples played\n", r + 1,
                            static_cast<unsigned long long>(reply_start[r + 1] - reply_start[r]));
            played = device.take_played();
        }
        const auto s = stream->stats();
        std::printf(
            "stats: %llu underruns, first audio %.1f ms (last reply), %llu cancels, sentences "
            "%llu spoken, %llu dropped\n",
            static_cast<unsigned long long>(s.underruns), s.first_audio_ms,
            static_cast<unsigned long long>(s.cancels),
            static_cast<unsigned long long>(s.sentences_spoken),
            static_cast<unsigned long long>(s.sentences_dropped));
        if (!wav_path.empty()) {
            etude::audio_io::WavWriter wav(wav_path, static_cast<int>(rate));
            wav.write(played);
            wav.commit();
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "assistant: %s\n", e.what());
        return 1;
    }
}
