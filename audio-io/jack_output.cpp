#include "audio-io/jack_output.h"

#include <jack/jack.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <thread>

#include "engine/error.h"
#include "rt/monotonic_clock.h"

namespace etude::audio_io {

void DurationHistogram::add(std::int64_t ns) noexcept {
    const auto us = static_cast<std::size_t>(std::max<std::int64_t>(ns, 0) / 1000);
    buckets_[std::min(us, kBuckets - 1)].fetch_add(1, std::memory_order_relaxed);
    count_.add();
    max_ns_.store_max(ns);
}

std::uint64_t DurationHistogram::count() const {
    return count_.get();
}

double DurationHistogram::percentile_us(double p) const {
    const std::uint64_t total = count();
    if (total == 0) return 0;
    const auto target = static_cast<std::uint64_t>(p * static_cast<double>(total - 1));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
        seen += buckets_[i].load(std::memory_order_relaxed);
        if (seen > target) return static_cast<double>(i) + 0.5;
    }
    return static_cast<double>(kBuckets);
}

namespace {
// libjack prints its own diagnostics (e.g. several lines when no server
// runs); we report problems ourselves, one line each, so drop them. These
// may be called from JACK's threads, so they must do nothing at all.
void quiet(const char*) {}
}  // namespace

JackOutput::JackOutput(engine::Engine& engine, JackOptions options)
    : engine_(engine), options_(std::move(options)) {
    jack_set_error_function(quiet);
    jack_set_info_function(quiet);
    jack_status_t status{};
    const auto flags = static_cast<jack_options_t>(
        JackNoStartServer | (options_.server_name.empty() ? 0 : JackServerName));
    client_ = options_.server_name.empty()
                  ? jack_client_open(options_.client_name.c_str(), flags, &status)
                  : jack_client_open(options_.client_name.c_str(), flags, &status,
                                     options_.server_name.c_str());
    if (!client_) {
        if (status & JackServerFailed)
            throw Error("no JACK server is running" +
                        (options_.server_name.empty() ? std::string()
                                                      : " named '" + options_.server_name + "'") +
                        " (start one, e.g. 'jackd -d alsa' or 'jackd -d dummy -r 48000 -p 128')");
        if (status & JackNameNotUnique)
            throw Error("a JACK client named '" + options_.client_name + "' already exists");
        throw Error("cannot open a JACK client (status 0x" + std::to_string(status) + ")");
    }
    rate_ = jack_get_sample_rate(client_);
    buffer_size_ = jack_get_buffer_size(client_);
    port_ = jack_port_register(client_, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    if (!port_) {
        jack_client_close(client_);
        throw Error("cannot register the JACK output port 'out'");
    }
    options_.stream.sample_rate = rate_;
    try {
        stream_ = engine_.create_stream(options_.stream);
    } catch (...) {
        jack_client_close(client_);
        throw;
    }
    live_ = stream_.get();
    jack_set_process_callback(client_, &JackOutput::on_process, this);
    jack_set_buffer_size_callback(client_, &JackOutput::on_buffer_size, this);
    jack_set_sample_rate_callback(client_, &JackOutput::on_sample_rate, this);
    jack_set_xrun_callback(client_, &JackOutput::on_xrun, this);
    jack_set_latency_callback(
        client_,
        [](jack_latency_callback_mode_t m, void* s) { on_latency(static_cast<int>(m), s); }, this);
    jack_on_info_shutdown(
        client_,
        [](jack_status_t c, const char* r, void* s) { on_shutdown(static_cast<int>(c), r, s); },
        this);
}

JackOutput::~JackOutput() {
    if (client_) {
        if (!shutdown_) jack_deactivate(client_);
        jack_client_close(client_);
    }
}

void JackOutput::activate() {
    if (jack_activate(client_) != 0) throw Error("cannot activate the JACK client");
}

std::string JackOutput::port_name() const {
    return jack_port_name(port_);
}

void JackOutput::connect(const std::string& destination) {
    std::vector<std::string> targets;
    if (destination == "system") {
        const char** ports = jack_get_ports(client_, nullptr, JACK_DEFAULT_AUDIO_TYPE,
                                            JackPortIsPhysical | JackPortIsInput);
        for (const char** p = ports; p && *p; ++p) targets.emplace_back(*p);
        jack_free(ports);
        if (targets.empty())
            throw Error("cannot connect to 'system': the JACK server has no playback ports");
    } else {
        if (!jack_port_by_name(client_, destination.c_str()))
            throw Error("cannot connect to '" + destination +
                        "': no such JACK port (see 'jack_lsp')");
        targets.push_back(destination);
    }
    for (const auto& t : targets) {
        const int rc = jack_connect(client_, jack_port_name(port_), t.c_str());
        if (rc != 0 && rc != EEXIST) throw Error("cannot connect to '" + t + "'");
    }
}

unsigned long JackOutput::process_thread() const {
    return static_cast<unsigned long>(jack_client_thread_id(client_));
}

std::uint32_t JackOutput::reported_latency_frames() const {
    return static_cast<std::uint32_t>(stream_->latency_ms() * rate_.load() / 1000.0 + 0.5);
}

void JackOutput::recreate_stream() {
    auto opts = options_.stream;
    opts.sample_rate = rate_.load();
    auto fresh = engine_.create_stream(opts);
    engine::Stream* old = live_.exchange(fresh.get());
    // Let any process cycle that still holds the old pointer finish.
    const auto seen = callbacks_.get();
    for (int i = 0; i < 200 && callbacks_.get() < seen + 2 && !shutdown_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (void)old;
    stream_ = std::move(fresh);
    jack_recompute_total_latencies(client_);
}

// Real-time: pull the ready samples into the port buffer, time it; nothing else.
int JackOutput::on_process(std::uint32_t nframes, void* self_ptr) {
    auto* self = static_cast<JackOutput*>(self_ptr);
    const auto t0 = rt::now_ns();
    auto* out = static_cast<float*>(jack_port_get_buffer(self->port_, nframes));
    engine::Stream* s = self->live_.load(std::memory_order_acquire);
    if (s->sample_rate() == self->rate_.load(std::memory_order_relaxed)) {
        s->pull(std::span<float>(out, nframes));
    } else {
        std::fill(out, out + nframes,
                  0.0f);  // rate changed: silence until the owner re-creates the stream
    }
    self->callbacks_.add();
    self->durations_.add(rt::now_ns() - t0);
    return 0;
}

int JackOutput::on_buffer_size(std::uint32_t nframes, void* self) {
    static_cast<JackOutput*>(self)->buffer_size_ = nframes;
    return 0;
}

int JackOutput::on_sample_rate(std::uint32_t rate, void* self) {
    static_cast<JackOutput*>(self)->rate_ = rate;
    return 0;
}

int JackOutput::on_xrun(void* self) {
    static_cast<JackOutput*>(self)->xruns_.add();
    return 0;
}

// Our output's signal was made `latency` frames before it leaves the port:
// report it as the port's capture latency so downstream clients can align.
void JackOutput::on_latency(int mode, void* self_ptr) {
    auto* self = static_cast<JackOutput*>(self_ptr);
    if (mode != JackCaptureLatency) return;
    const auto frames = self->reported_latency_frames();
    jack_latency_range_t range{frames, frames};
    jack_port_set_latency_range(self->port_, JackCaptureLatency, &range);
}

void JackOutput::on_shutdown(int, const char* reason, void* self_ptr) {
    auto* self = static_cast<JackOutput*>(self_ptr);
    if (!self->shutdown_.load()) self->shutdown_reason_ = reason ? reason : "";
    self->shutdown_ = true;
}

}  // namespace etude::audio_io
