// The C API over the C++ engine: exceptions stop here and become status codes.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/c_stream_options.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/etude.h"

struct etude_engine {
    etude::engine::Engine engine;
};
struct etude_stream {
    std::unique_ptr<etude::engine::Stream> stream;
};

namespace {

thread_local std::string last_error;

// Runs f; what it throws becomes a status (engine/error.h's one mapping,
// which the Python package uses too) and the thread's last error.
template <typename F>
etude_status guarded(F&& f, etude_status caller_fault = ETUDE_ERROR_INVALID_ARGUMENT) {
    try {
        f();
        last_error.clear();
        return ETUDE_OK;
    } catch (...) {
        return etude::status_of(std::current_exception(), caller_fault, last_error);
    }
}

etude_status null_argument(const char* what) {
    last_error = std::string(what) + " is NULL";
    return ETUDE_ERROR_INVALID_ARGUMENT;
}

// Every field this version reads (the first `needed` bytes) must be in
// the caller's struct; else an error naming the *_init() to call.
etude_status check_struct_size(std::size_t struct_size, std::size_t needed, const char* init) {
    if (struct_size >= needed) return ETUDE_OK;
    last_error = "options->struct_size is " + std::to_string(struct_size) +
                 ": fill the options with " + init + "(&options, sizeof options)";
    return ETUDE_ERROR_INVALID_ARGUMENT;
}

// push_text() and push_ssml(): the bytes as a view (`length` < 0: up to the
// NUL), and the engine's refusal of them reported as invalid text.
template <typename Push>
etude_status push_utf8(etude_stream* stream, const char* name, const char* bytes, ptrdiff_t length,
                       Push push) {
    if (!stream) return null_argument("stream");
    if (!bytes) return null_argument(name);
    const std::string_view view =
        length < 0 ? std::string_view(bytes) : std::string_view(bytes, static_cast<size_t>(length));
    return guarded([&] { push(*stream->stream, view); }, ETUDE_ERROR_INVALID_TEXT);
}

}  // namespace

extern "C" {

const char* etude_last_error(void) {
    return last_error.c_str();
}
const char* etude_version(void) {
    return "0.1.0";
}

etude_status etude_engine_create(etude_engine** out) {
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded([&] { *out = new etude_engine{}; });
}

void etude_engine_destroy(etude_engine* engine) {
    delete engine;
}

etude_status etude_engine_preload_voice(etude_engine* engine, const char* voice) {
    if (!engine) return null_argument("engine");
    if (!voice) return null_argument("voice");
    return guarded([&] { engine->engine.preload_voice(voice); });
}

etude_status etude_set_espeak_data(const char* folder) {
    if (!folder) return null_argument("folder");
    return guarded([&] { etude::engine::Engine::set_espeak_data(folder); });
}

namespace {

// The options of a measurement's streams: those of a stream made with the
// defaults for `voice`. `what` names the measurement in errors.
etude::engine::StreamOptions measured_stream_options(const char* voice, const char* what) {
    etude::engine::StreamOptions o;
    const std::string name = voice ? voice : "slt";
    if (name.empty()) throw etude::Error(std::string(what) + ": the voice is empty");
    const auto& builtin = etude::engine::Engine::voices();
    if (std::find(builtin.begin(), builtin.end(), name) != builtin.end()) {
        o.voice = etude::engine::BuiltinVoiceOptions{.voice = name};
    } else {
        // As etude_piper_stream_options_init() makes a Piper stream: at
        // the voice's own rate, its default speaker, backend "auto".
        o.voice = etude::engine::PiperVoiceOptions{.piper_voice = name};
        o.sample_rate = 0;
    }
    return o;
}

}  // namespace

etude_status etude_engine_measure_capacity(etude_engine* engine, const char* voice, int at_once,
                                           double* speed, size_t* streams) {
    if (!engine) return null_argument("engine");
    if (!streams) return null_argument("streams");
    return guarded([&] {
        const etude::engine::EngineCapacity c = engine->engine.measure_capacity(
            measured_stream_options(voice, "measure_capacity"), at_once);
        if (speed) *speed = c.speed;
        *streams = c.streams;
    });
}

etude_status etude_engine_measure_first_audio(etude_engine* engine, const char* voice, int at_once,
                                              double* median_ms, double* last_ms) {
    if (!engine) return null_argument("engine");
    if (!last_ms) return null_argument("last_ms");
    return guarded([&] {
        const etude::engine::FirstAudioMeasure f = engine->engine.measure_first_audio(
            measured_stream_options(voice, "measure_first_audio"), at_once);
        if (median_ms) *median_ms = f.median_ms;
        *last_ms = f.last_ms;
    });
}

etude_status etude_stream_create(etude_engine* engine, const char* voice, double sample_rate,
                                 etude_stream** out) {
    if (!engine) return null_argument("engine");
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded([&] {
        etude::engine::StreamOptions o;
        if (voice) o.voice = etude::engine::BuiltinVoiceOptions{.voice = voice};
        o.sample_rate = sample_rate;
        *out = new etude_stream{engine->engine.create_stream(o)};
    });
}

etude_status etude_stream_create_mel(etude_engine* engine, const char* model_path,
                                     const char* backend, double sample_rate, etude_stream** out) {
    if (!engine) return null_argument("engine");
    if (!model_path) return null_argument("model_path");
    etude_mel_stream_options o;
    etude_mel_stream_options_init(&o, sizeof o);
    o.model_path = model_path;
    if (backend) o.backend = backend;
    o.sample_rate = sample_rate;
    return etude_stream_create_mel_ex(engine, &o, out);
}

void etude_mel_stream_options_init(etude_mel_stream_options* options, size_t struct_size) {
    etude::engine::fill_c_defaults(options, struct_size, etude::engine::c_mel_options(),
                                   sizeof *options, 48000.0);
}

etude_status etude_stream_create_mel_ex(etude_engine* engine,
                                        const etude_mel_stream_options* options,
                                        etude_stream** out) {
    if (!engine) return null_argument("engine");
    if (!options) return null_argument("options");
    if (const auto status = check_struct_size(
            options->struct_size, offsetof(etude_mel_stream_options, sample_rate) + sizeof(double),
            "etude_mel_stream_options_init");
        status != ETUDE_OK)
        return status;
    if (!options->model_path) return null_argument("options->model_path");
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded([&] {
        const auto o = etude::engine::read_c_options(options, options->struct_size,
                                                     etude::engine::c_mel_options());
        *out = new etude_stream{engine->engine.create_stream(o)};
    });
}

void etude_piper_stream_options_init(etude_piper_stream_options* options, size_t struct_size) {
    etude::engine::fill_c_defaults(options, struct_size, etude::engine::c_piper_options(),
                                   sizeof *options, 0.0);
}

etude_status etude_stream_create_piper(etude_engine* engine,
                                       const etude_piper_stream_options* options,
                                       etude_stream** out) {
    if (!engine) return null_argument("engine");
    if (!options) return null_argument("options");
    if (const auto status = check_struct_size(
            options->struct_size, offsetof(etude_piper_stream_options, latency_ms) + sizeof(double),
            "etude_piper_stream_options_init");
        status != ETUDE_OK)
        return status;
    if (!options->voice) return null_argument("options->voice");
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded([&] {
        const auto o = etude::engine::read_c_options(options, options->struct_size,
                                                     etude::engine::c_piper_options());
        *out = new etude_stream{engine->engine.create_stream(o)};
    });
}

etude_status etude_stream_push_phoneme_ids(etude_stream* stream, const int64_t* ids, size_t count) {
    if (!stream) return null_argument("stream");
    if (!ids && count > 0) return null_argument("ids");
    return guarded(
        [&] { stream->stream->push_phoneme_ids(std::span<const std::int64_t>(ids, count)); });
}

struct etude_voice_info {
    etude::engine::VoiceInfo info;
};

etude_status etude_voice_info_open(const char* voice, etude_voice_info** out) {
    if (!voice) return null_argument("voice");
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded(
        [&] { *out = new etude_voice_info{etude::engine::Engine::describe_voice(voice)}; });
}

void etude_voice_info_destroy(etude_voice_info* info) {
    delete info;
}

const char* etude_voice_info_name(const etude_voice_info* info) {
    return info ? info->info.name.c_str() : nullptr;
}

const char* etude_voice_info_language(const etude_voice_info* info) {
    return info ? info->info.language.c_str() : nullptr;
}

const char* etude_voice_info_quality(const etude_voice_info* info) {
    return info ? info->info.quality.c_str() : nullptr;
}

int etude_voice_info_sample_rate(const etude_voice_info* info) {
    return info ? info->info.sample_rate : 0;
}

size_t etude_voice_info_speaker_count(const etude_voice_info* info) {
    return info ? info->info.speakers.size() : 0;
}

const char* etude_voice_info_speaker(const etude_voice_info* info, size_t id) {
    if (!info || id >= info->info.speakers.size()) return nullptr;
    return info->info.speakers[id].c_str();
}

int etude_voice_info_is_builtin(const etude_voice_info* info) {
    return info && info->info.kind == etude::engine::VoiceInfo::Kind::Builtin;
}

const char* etude_voice_info_model_path(const etude_voice_info* info) {
    return info ? info->info.model_path.c_str() : nullptr;
}

struct etude_voice_list {
    std::vector<etude_voice_info> voices;
};

etude_status etude_voice_list_open(etude_voice_list** out) {
    if (!out) return null_argument("out");
    *out = nullptr;
    return guarded([&] {
        auto list = std::make_unique<etude_voice_list>();
        for (auto& v : etude::engine::Engine::list_voices())
            if (v.problem.empty()) list->voices.push_back(etude_voice_info{std::move(v)});
        *out = list.release();
    });
}

void etude_voice_list_destroy(etude_voice_list* list) {
    delete list;
}

size_t etude_voice_list_count(const etude_voice_list* list) {
    return list ? list->voices.size() : 0;
}

const etude_voice_info* etude_voice_list_voice(const etude_voice_list* list, size_t index) {
    if (!list || index >= list->voices.size()) return nullptr;
    return &list->voices[index];
}

void etude_stream_destroy(etude_stream* stream) {
    delete stream;
}

etude_status etude_stream_push_mel(etude_stream* stream, const float* mel, size_t n_mels,
                                   size_t frames, int last) {
    if (!stream) return null_argument("stream");
    if (!mel && frames > 0) return null_argument("mel");
    return guarded([&] {
        if (n_mels != stream->stream->mel_bands())
            throw etude::Error("push_mel: " + std::to_string(n_mels) +
                               " mel bands, but the model takes " +
                               std::to_string(stream->stream->mel_bands()));
        const std::size_t n = n_mels * frames;
        if (frames > 0 && n / frames != n_mels) throw etude::Error("push_mel: size overflows");
        stream->stream->push_mel(std::span<const float>(mel, n), frames, last != 0);
    });
}

etude_status etude_stream_push_text(etude_stream* stream, const char* text, ptrdiff_t length) {
    return push_utf8(stream, "text", text, length,
                     [](etude::engine::Stream& s, std::string_view v) { s.push_text(v); });
}

etude_status etude_stream_push_ssml(etude_stream* stream, const char* ssml, ptrdiff_t length) {
    return push_utf8(stream, "ssml", ssml, length,
                     [](etude::engine::Stream& s, std::string_view v) { s.push_ssml(v); });
}

etude_status etude_stream_set_prosody(etude_stream* stream, float rate, float pitch, float range,
                                      float volume) {
    if (!stream) return null_argument("stream");
    etude::engine::Prosody p;
    p.rate = rate;
    p.pitch = pitch;
    p.range = range;
    p.volume = volume;
    return guarded([&] { stream->stream->set_prosody(p); });
}

int etude_stream_next_mark(etude_stream* stream, etude_mark* mark) {
    if (!stream || !mark) return 0;
    etude::engine::SpeechMark m;
    if (!stream->stream->next_mark(m)) return 0;
    static_assert(sizeof(m.name) == sizeof(mark->name));
    std::memcpy(mark->name, m.name, sizeof(m.name));
    mark->sample = m.sample;
    mark->kind = m.kind == etude::engine::SpeechMark::Word ? ETUDE_MARK_WORD : ETUDE_MARK_NAMED;
    return 1;
}

void etude_stream_report_words(etude_stream* stream, int on) {
    if (stream) stream->stream->report_words(on != 0);
}

uint64_t etude_stream_position(const etude_stream* stream) {
    return stream ? stream->stream->position() : 0;
}

etude_status etude_stream_end_input(etude_stream* stream) {
    if (!stream) return null_argument("stream");
    return guarded([&] { stream->stream->end_input(); }, ETUDE_ERROR_INVALID_TEXT);
}

size_t etude_stream_pull(etude_stream* stream, float* out, size_t frames) {
    if (!stream || !out) return 0;
    return stream->stream->pull(std::span<float>(out, frames));
}

size_t etude_stream_read(etude_stream* stream, float* out, size_t frames) {
    if (!stream || !out) return 0;
    try {
        return stream->stream->read(std::span<float>(out, frames));
    } catch (const std::exception& e) {
        last_error = e.what();
        return 0;
    }
}

etude_status etude_stream_cancel(etude_stream* stream) {
    if (!stream) return null_argument("stream");
    return guarded([&] { stream->stream->cancel(); });
}

int etude_stream_busy(const etude_stream* stream) {
    return stream && stream->stream->busy();
}

etude_status etude_stream_get_stats(const etude_stream* stream, etude_stream_stats* out) {
    if (!stream) return null_argument("stream");
    if (!out) return null_argument("out");
    const auto s = stream->stream->stats();
    *out = etude_stream_stats{s.samples_delivered, s.underruns,        s.underrun_samples,
                              s.sentences_queued,  s.sentences_spoken, s.sentences_dropped,
                              s.frames_vocoded,    s.cancels,          s.first_audio_ms};
    return ETUDE_OK;
}

size_t etude_stream_unspeakable_reason(const etude_stream* stream, char* buf, size_t size) {
    if (!stream) return 0;
    try {
        const std::string reason = stream->stream->stats().unspeakable_reason;
        if (buf && size > 0) {
            const std::size_t n = std::min(reason.size(), size - 1);
            std::memcpy(buf, reason.data(), n);
            buf[n] = '\0';
        }
        return reason.size();
    } catch (...) {  // no memory for the copy: nothing to report
        if (buf && size > 0) buf[0] = '\0';
        return 0;
    }
}

etude_status etude_stream_get_mel_stats(const etude_stream* stream, etude_mel_stats* out) {
    if (!stream) return null_argument("stream");
    if (!out) return null_argument("out");
    return guarded([&] {
        if (stream->stream->mel_bands() == 0)
            throw etude::Error("get_mel_stats: not a mel stream (made by etude_stream_create)");
        const auto s = stream->stream->stats();
        *out = etude_mel_stats{s.mel_frames,       s.mel_chunks_gpu, s.mel_chunks_cpu,
                               s.mel_chunks_phase, s.gpu_failures,   s.model_latency_ms};
    });
}

}  // extern "C"
