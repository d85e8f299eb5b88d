#include "audio-io/portaudio_output.h"

#include <fcntl.h>
#include <portaudio.h>
#include <unistd.h>

#include <cstdlib>
#include <span>

#include "engine/error.h"

namespace etude::audio_io {
namespace {

// PortAudio's ALSA and JACK back ends print probing errors straight to
// stderr while initialising, which would bury our own messages. Keep stderr
// closed for just that call.
class QuietStderr {
  public:
    QuietStderr() {
        saved_ = ::dup(2);
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) {
            ::dup2(null, 2);
            ::close(null);
        }
    }
    ~QuietStderr() {
        if (saved_ >= 0) {
            ::dup2(saved_, 2);
            ::close(saved_);
        }
    }

  private:
    int saved_ = -1;
};

void check(PaError err, const std::string& what) {
    if (err != paNoError) throw Error(what + ": " + Pa_GetErrorText(err));
}

}  // namespace

PortAudioSystem::PortAudioSystem() {
    // Never let PortAudio's JACK host API start a JACK server by itself.
    ::setenv("JACK_NO_START_SERVER", "1", 0);
    PaError err;
    {
        QuietStderr quiet;
        err = Pa_Initialize();
    }
    check(err, "cannot initialise PortAudio");
}

PortAudioSystem::~PortAudioSystem() {
    Pa_Terminate();
}

std::vector<std::string> PortAudioSystem::host_apis() const {
    std::vector<std::string> out;
    for (PaHostApiIndex i = 0; i < Pa_GetHostApiCount(); ++i)
        if (const PaHostApiInfo* info = Pa_GetHostApiInfo(i)) out.emplace_back(info->name);
    return out;
}

std::vector<AudioDevice> PortAudioSystem::output_devices() const {
    std::vector<AudioDevice> out;
    const PaDeviceIndex def = Pa_GetDefaultOutputDevice();
    for (PaDeviceIndex i = 0; i < Pa_GetDeviceCount(); ++i) {
        const PaDeviceInfo* info = Pa_GetDeviceInfo(i);
        if (!info || info->maxOutputChannels <= 0) continue;
        const PaHostApiInfo* api = Pa_GetHostApiInfo(info->hostApi);
        out.push_back({i, info->name, api ? api->name : "?", info->maxOutputChannels,
                       info->defaultSampleRate, i == def});
    }
    return out;
}

int PortAudioSystem::find_output_device(const std::string& spec,
                                        const std::string& host_api) const {
    const auto devices = output_devices();
    auto api_ok = [&](const AudioDevice& d) {
        return host_api.empty() || d.host_api.find(host_api) != std::string::npos;
    };
    if (spec.empty()) {
        if (host_api.empty()) {
            for (const auto& d : devices)
                if (d.is_default_output) return d.index;
        } else {
            for (PaHostApiIndex i = 0; i < Pa_GetHostApiCount(); ++i) {
                const PaHostApiInfo* info = Pa_GetHostApiInfo(i);
                if (info && std::string(info->name).find(host_api) != std::string::npos &&
                    info->defaultOutputDevice >= 0)
                    return info->defaultOutputDevice;
            }
        }
    } else {
        char* end = nullptr;
        const long idx = std::strtol(spec.c_str(), &end, 10);
        const bool numeric = end && *end == '\0';
        for (const auto& d : devices)
            if (api_ok(d) && (numeric ? d.index == idx : d.name.find(spec) != std::string::npos))
                return d.index;
    }
    std::string known;
    for (const auto& d : devices)  // one line: errors are single lines
        known += (known.empty() ? " " : ", ") + std::to_string(d.index) + ": " + d.name + " (" +
                 d.host_api + ")";
    if (known.empty()) known = " none";
    throw Error("no audio output device" +
                (spec.empty() ? std::string() : " matches '" + spec + "'") +
                (host_api.empty() ? "" : " on host API '" + host_api + "'") +
                "; output devices found:" + known);
}

PortAudioOutput::PortAudioOutput(PortAudioSystem&, engine::Stream& stream, int device,
                                 unsigned long frames_per_buffer, rt::SpscRing<float>* tap)
    : stream_(stream), tap_(tap) {
    const PaDeviceInfo* info = Pa_GetDeviceInfo(device);
    if (!info) throw Error("audio device " + std::to_string(device) + " does not exist");
    PaStreamParameters out{};
    out.device = device;
    out.channelCount = 1;
    out.sampleFormat = paFloat32;
    out.suggestedLatency = info->defaultLowOutputLatency;
    const double rate = stream.sample_rate();
    const std::string where = "cannot open audio device '" + std::string(info->name) + "' at " +
                              std::to_string(static_cast<long>(rate)) + " Hz";
    check(Pa_IsFormatSupported(nullptr, &out, rate), where);
    check(Pa_OpenStream(&pa_, nullptr, &out, rate, frames_per_buffer, paNoFlag,
                        &PortAudioOutput::callback, this),
          where);
    if (const PaStreamInfo* si = Pa_GetStreamInfo(pa_)) latency_ = si->outputLatency;
}

PortAudioOutput::~PortAudioOutput() {
    if (pa_) {
        Pa_AbortStream(pa_);
        Pa_CloseStream(pa_);
    }
}

void PortAudioOutput::start() {
    check(Pa_StartStream(pa_), "cannot start audio output");
}
void PortAudioOutput::stop() {
    if (pa_ && Pa_IsStreamActive(pa_) == 1) Pa_StopStream(pa_);
}

// Real-time: pull ready samples, copy them to the tap; nothing else.
int PortAudioOutput::callback(const void*, void* output, unsigned long frames,
                              const PaStreamCallbackTimeInfo*, unsigned long flags, void* user) {
    auto* self = static_cast<PortAudioOutput*>(user);
    std::span<float> out(static_cast<float*>(output), frames);
    const std::size_t n = self->stream_.pull(out);
    if (self->tap_ && n > 0 && self->tap_->write(out.first(n)) < n)
        self->tap_overflows_.fetch_add(1, std::memory_order_relaxed);
    if (flags & paOutputUnderflow) self->underflows_.fetch_add(1, std::memory_order_relaxed);
    self->callbacks_.fetch_add(1, std::memory_order_relaxed);
    return paContinue;
}

}  // namespace etude::audio_io
