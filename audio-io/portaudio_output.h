// Playing a Stream through PortAudio's callback API.
//
// Ownership: PortAudioSystem is the RAII guard for Pa_Initialize/Pa_Terminate;
// PortAudioOutput owns one PortAudio stream. The PortAudio callback only calls
// Stream::pull() and, when a tap is attached, copies the same samples into a
// wait-free ring for a non-real-time reader (e.g. a WAV writer).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "rt/spsc_ring.h"

typedef void PaStream;
struct PaStreamCallbackTimeInfo;

namespace etude::audio_io {

struct AudioDevice {
    int index = -1;
    std::string name;
    std::string host_api;
    int max_output_channels = 0;
    double default_sample_rate = 0;
    bool is_default_output = false;
};

class PortAudioSystem {
  public:
    // Initialises PortAudio with its probing chatter on stderr silenced;
    // throws etude::Error if PortAudio cannot start.
    PortAudioSystem();
    ~PortAudioSystem();
    PortAudioSystem(const PortAudioSystem&) = delete;
    PortAudioSystem& operator=(const PortAudioSystem&) = delete;

    std::vector<AudioDevice> output_devices() const;
    std::vector<std::string> host_apis() const;
    // Resolves "" (default), a decimal index or a name substring to an output
    // device index; throws etude::Error listing what exists if none matches.
    int find_output_device(const std::string& spec, const std::string& host_api = "") const;
};

class PortAudioOutput {
  public:
    // Opens a mono output stream on `device` at the Stream's sample rate;
    // throws etude::Error naming the device and rate if it cannot open.
    PortAudioOutput(PortAudioSystem& system, engine::Stream& stream, int device,
                    unsigned long frames_per_buffer = 256, rt::SpscRing<float>* tap = nullptr);
    ~PortAudioOutput();
    PortAudioOutput(const PortAudioOutput&) = delete;
    PortAudioOutput& operator=(const PortAudioOutput&) = delete;

    void start();
    void stop();
    std::uint64_t callbacks() const { return callbacks_.load(std::memory_order_relaxed); }
    std::uint64_t tap_overflows() const { return tap_overflows_.load(std::memory_order_relaxed); }
    std::uint64_t output_underflows() const { return underflows_.load(std::memory_order_relaxed); }
    double output_latency_seconds() const { return latency_; }

  private:
    static int callback(const void*, void* output, unsigned long frames,
                        const PaStreamCallbackTimeInfo* time, unsigned long flags, void* self);

    engine::Stream& stream_;
    rt::SpscRing<float>* tap_;
    PaStream* pa_ = nullptr;
    double latency_ = 0;
    std::atomic<std::uint64_t> callbacks_{0}, tap_overflows_{0}, underflows_{0};
};

}  // namespace etude::audio_io
