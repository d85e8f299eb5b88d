// The public facades: Engine (voices, the shared workers, the stream
// factory) and Stream (forwards to its StreamCore, engine/streams/stream_core.h).
#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "engine/models/model_metadata.h"
#include "engine/piper/espeak_session.h"
#include "engine/piper/voice_catalog.h"
#include "engine/scheduling/device_choice.h"
#include "engine/scheduling/engine_workers.h"
#include "engine/streams/idle_memory.h"
#include "engine/streams/stream_core.h"
#include "engine/voices/flite_voice.h"
#include "engine/voices/piper_voice.h"
#include "engine/voices/voice_list.h"
#include "gpu/registry.h"
#include "rt/fork_generation.h"

namespace etude::engine {
namespace {

constexpr double kMinRate = 8000.0, kMaxRate = 192000.0;
constexpr double kFliteRate = 16000.0;  // the built-in voices' own rate

// Threads do not survive fork() (rt/fork_generation.h): in a child of the
// process that made an engine, its workers and its streams' threads are
// gone, and a call that waits for them would wait for ever. Such a call is
// refused instead; pull(), which waits for no thread, still works, and
// cancel() and busy() have nothing to do there (no thread of the stream
// makes audio in the child).
bool made_in_another_process(std::uint64_t made_in) {
    return rt::fork_generation() != made_in;
}

void refuse_after_fork(std::uint64_t made_in, const char* what) {
    if (made_in_another_process(made_in))
        throw MadeBeforeFork(
            std::string("this ") + what +
            " was made before the process forked, and its threads are not in this process: "
            "a forked child makes an engine of its own (with Python's multiprocessing, make "
            "it in the child, or use the 'spawn' or 'forkserver' start method)");
}

}  // namespace

// ---- Stream -----------------------------------------------------------------

Stream::Stream(std::shared_ptr<StreamCore> core)
    : core_(std::move(core)), fork_generation_(rt::fork_generation()) {}
Stream::~Stream() {
    // The engine may hold the stream's insides a little longer (a step in
    // progress): its listener goes with the stream.
    if (core_ && !made_in_another_process(fork_generation_)) core_->set_audio_listener({});
    // In a forked child the stream's state still names its producer and
    // the locks and conditions the parent's threads held or waited on;
    // tearing it down would wait for them for ever. It is left, unfreed.
    if (made_in_another_process(fork_generation_))
        (void)new std::shared_ptr<StreamCore>(std::move(core_));
}
void Stream::check_process() const {
    refuse_after_fork(fork_generation_, "stream");
}
void Stream::push_mel(std::span<const float> mel, std::size_t frames, bool last) {
    check_process();
    core_->push_mel(mel, frames, last);
}
void Stream::push_phoneme_ids(std::span<const std::int64_t> ids) {
    check_process();
    core_->push_phoneme_ids(ids);
}
std::size_t Stream::mel_bands() const {
    return core_->mel_bands();
}
std::size_t Stream::push_text(std::string_view text) {
    check_process();
    return core_->push_text(text);
}
std::size_t Stream::pull(std::span<float> out) noexcept {
    return core_->pull(out);
}
std::size_t Stream::end_input() {
    check_process();
    return core_->end_input();
}
std::size_t Stream::read(std::span<float> out) {
    check_process();
    return core_->read(out);
}
void Stream::set_audio_listener(std::function<void()> listener) {
    check_process();
    core_->set_audio_listener(std::move(listener));
}
std::size_t Stream::read_some(std::span<float> out, int timeout_ms) {
    check_process();
    return core_->read_some(out, timeout_ms);
}
void Stream::cancel() {
    if (made_in_another_process(fork_generation_)) return;
    core_->cancel();
}
void Stream::set_voice(std::string_view voice) {
    check_process();
    core_->set_voice(voice);
}
bool Stream::busy() const {
    if (made_in_another_process(fork_generation_)) return false;
    return core_->busy();
}
std::size_t Stream::push_ssml(std::string_view document) {
    check_process();
    return core_->push_ssml(document);
}

void Stream::push_mark(std::string_view name) {
    check_process();
    core_->push_mark(name);
}

void Stream::push_break(double ms) {
    check_process();
    core_->push_break(ms);
}

void Stream::set_prosody(const Prosody& prosody) {
    check_process();
    core_->set_stream_prosody(prosody);
}

bool Stream::next_mark(SpeechMark& mark) noexcept {
    return core_->next_mark(mark);
}

void Stream::report_words(bool on) noexcept {
    core_->report_words(on);
}

std::uint64_t Stream::position() const noexcept {
    return core_->position();
}

double Stream::latency_ms() const {
    return core_->latency_ms();
}
double Stream::sample_rate() const {
    return core_->options().sample_rate;
}
const std::string& Stream::voice() const {
    return core_->voice_name();
}
StreamStats Stream::stats() const {
    return core_->stats();
}
std::vector<BlockRecord> Stream::block_records(std::size_t max) const {
    return core_->block_records(max);
}

void Stream::write_trace(const std::string& path) const {
    core_->write_trace(path);
}

// ---- Engine -----------------------------------------------------------------

namespace {

// A Piper stream asks for its decoder's GPU tier ("auto" by default), and the
// first such ask in a process finds the devices (145 ms with PoCL on the test
// VM: most of a server's first request) and opens the one chosen. An engine
// that preloads a Piper voice asks at once. A failure is left for the
// stream, which reports it and falls back to the CPU.
void open_gpu_tier_now(const std::string& backend, int device) {
    if (backend == "cpu") return;
    try {
        open_model_backend(backend, device, nullptr);
    } catch (const gpu::DeviceError&) {
    } catch (const std::invalid_argument&) {  // a bad ETUDE_BACKEND
    }
}

}  // namespace

Engine::Engine() : Engine(Options{}) {}

Engine::Engine(Options options)
    : fork_generation_(rt::fork_generation()),
      core_(std::make_shared<EngineWorkers>(options.work_turns, options.network_turns)),
      preload_backend_(std::move(options.preload_backend)),
      preload_device_(options.preload_device) {
    if (options.profile_kernels) gpu::DeviceRegistry::instance().set_profiling(true);
    if (options.device_precision != DevicePrecision::Fp32)
        set_device_precision(options.device_precision);
    for (const auto& v : options.preload_voices) preload_voice(v);
}

void Engine::give_back_free_memory() {
    engine::give_back_free_memory();
}

EngineStats Engine::stats() const {
    EngineStats s;
    s.work_turns = core_->gate().turns();
    s.network_turns = core_->network_gate().turns();
    s.front_end_threads = core_->front_end_threads();
    s.most_analyses_at_once = core_->most_analyses_at_once();
    s.front_end_looks = core_->front_end_looks();
    s.render_looks = core_->render_looks();
    return s;
}

void Engine::check_process() const {
    refuse_after_fork(fork_generation_, "engine");
}

void Engine::preload_voice(const std::string& v) {
    check_process();
    const auto& builtin = FliteVoice::names();
    if (std::find(builtin.begin(), builtin.end(), v) != builtin.end()) {
        FliteVoice::load(v);
        return;
    }
    std::shared_ptr<const PiperVoice> voice;
    try {
        voice = PiperVoice::open(v);
    } catch (const piper::VoiceNotFound&) {
        FliteVoice::load(v);  // throws, listing the built-in voices
        throw;
    }
    voice->prepare(voice->speaker_id(""));
    // Once per engine: the registry keeps a backend it opened, but not a
    // failure, so every further ask would try (and compile) again.
    bool first;
    {
        std::lock_guard lock(piper_voices_mu_);
        first = !std::exchange(gpu_tier_preloaded_, true);
    }
    if (first) open_gpu_tier_now(preload_backend_, preload_device_);
    keep_voice(voice);
}

void Engine::keep_voice(const std::shared_ptr<const PiperVoice>& voice) {
    std::lock_guard lock(piper_voices_mu_);
    if (std::find(piper_voices_.begin(), piper_voices_.end(), voice) == piper_voices_.end())
        piper_voices_.push_back(voice);
}

Engine::~Engine() {
    if (made_in_another_process(fork_generation_)) {
        // As a stream's (above): the workers to stop are the parent's, and
        // the voices' device buffers belong to the parent's drivers.
        (void)new std::shared_ptr<EngineWorkers>(std::move(core_));
        (void)new std::vector<std::shared_ptr<const PiperVoice>>(std::move(piper_voices_));
        return;
    }
    core_->stop();
}

void Engine::set_espeak_data(const std::string& folder) {
    piper::EspeakSession::set_data_folder(folder);
}

const std::vector<std::string>& Engine::voices() {
    return FliteVoice::names();
}

VoiceInfo Engine::describe_voice(const std::string& name_or_path) {
    const auto voice = PiperVoice::open(name_or_path);
    VoiceInfo info = piper_voice_info(voice->name(), voice->model_path(), voice->config());
    info.sample_rate = voice->sample_rate();
    info.speakers = voice->speaker_names();
    return info;
}

std::vector<std::string> Engine::installed_voices() {
    std::vector<std::string> paths;
    for (const auto& v : piper::list_voices()) paths.push_back(v.model_path);
    return paths;
}

std::unique_ptr<Stream> Engine::create_stream(const StreamOptions& requested) {
    check_process();
    StreamOptions options = requested;
    // The scheduling class and the older field that says it: a stream
    // nobody hears as it is made has no real-time workers, and one without
    // them is scheduled as a network stream.
    if (options.scheduling != SchedulingClass::Live) options.realtime_workers = false;
    if (!options.realtime_workers && options.scheduling == SchedulingClass::Live)
        options.scheduling = SchedulingClass::Network;
    const auto* builtin = std::get_if<BuiltinVoiceOptions>(&options.voice);
    const auto* mel = std::get_if<MelVoiceOptions>(&options.voice);
    std::shared_ptr<const PiperVoice> piper;
    if (const auto* p = std::get_if<PiperVoiceOptions>(&options.voice)) {
        if (p->piper_voice.empty()) throw Error("a Piper stream needs its voice (piper_voice)");
        piper = PiperVoice::open(p->piper_voice);
        keep_voice(piper);
    }
    if (mel && mel->model.empty()) throw Error("a mel stream needs its model");
    // 0: the voice's own rate.
    if (options.sample_rate == 0.0)
        options.sample_rate = piper ? piper->sample_rate()
                              : mel ? read_model_audio(mel->model).sample_rate
                                    : kFliteRate;
    if (!(options.sample_rate >= kMinRate && options.sample_rate <= kMaxRate))
        throw Error("output sample rate " +
                    std::to_string(static_cast<long long>(options.sample_rate)) +
                    " Hz is outside the supported 8000-192000 Hz");
    if (!(options.latency_ms >= 5.0 && options.latency_ms <= 10000.0))
        throw Error("latency budget must be between 5 and 10000 ms");
    if (builtin && !(builtin->block_ms >= 5.0 && builtin->block_ms <= 200.0))
        throw Error("block length must be between 5 and 200 ms");
    if (const auto* p = std::get_if<PiperVoiceOptions>(&options.voice);
        p && !(p->sentence_silence_ms >= 0.0 && p->sentence_silence_ms <= 60000.0))
        throw Error("sentence silence must be between 0 and 60000 ms");
    // Piper and mel streams carry the default built-in voice, unspoken.
    const FliteVoice& voice =
        FliteVoice::load(builtin ? builtin->voice : BuiltinVoiceOptions{}.voice);
    auto core = std::make_shared<StreamCore>(core_, voice, std::move(piper), options);
    core->start();
    core_->add(core);
    return std::unique_ptr<Stream>(new Stream(std::move(core)));
}

}  // namespace etude::engine
