// libetude._native: the C++ API of engine/engine.h, one to one, for the
// Python package beside it (python/libetude/). Thin on purpose: voice lookup,
// context managers, iteration, async and the CLI are plain Python.
//
// Every call that can wait (loading voices, making a stream, reading audio,
// cancelling) runs with the GIL released. Errors leave as the Python classes
// of libetude._errors, chosen by engine/error.h's mapping from exceptions to
// the C API's codes: what c_api.cpp returns for the same failure.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/etude.h"

namespace nb = nanobind;
using namespace nb::literals;
using etude::engine::Engine;
using etude::engine::EngineCapacity;
using etude::engine::FirstAudioMeasure;
using etude::engine::Prosody;
using etude::engine::SchedulingClass;
using etude::engine::SpeechMark;
using etude::engine::Stream;
using etude::engine::StreamOptionField;
using etude::engine::StreamOptionMember;
using etude::engine::StreamOptionPlace;
using etude::engine::StreamOptions;
using etude::engine::StreamStats;
using etude::engine::VoiceInfo;
using etude::engine::VoiceKind;

namespace {

// A failure on its way to Python, with the C API's status for it; not a
// std::exception, so that nothing between the throw and the translator can
// take it for another.
struct Failure {
    etude_status status;
    std::string message;
};

// What `f` throws leaves as a Failure with the status engine/error.h's
// mapping gives it, the one c_api.cpp returns for the same failure
// (`caller_fault`: an etude::Error's, the argument's or the text's).
template <typename F>
auto guarded(etude_status caller_fault, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (...) {
        Failure failure{ETUDE_ERROR_INTERNAL, {}};
        failure.status = etude::status_of(std::current_exception(), caller_fault, failure.message);
        throw failure;
    }
}

// The Python class of libetude._errors that engine/error.h's table names
// for `status`.
const char* python_class(etude_status status) {
    for (const auto& s : etude::kFailureStatuses)
        if (s.status == status) return s.python_class;
    return "InternalError";
}

void translate(const std::exception_ptr& p, void*) {
    try {
        std::rethrow_exception(p);
    } catch (const Failure& f) {
        // The classes live in Python (libetude/_errors.py); without that
        // module (the extension imported alone) a RuntimeError says the same.
        nb::object cls;
        try {
            cls = nb::module_::import_("libetude._errors").attr(python_class(f.status));
        } catch (nb::python_error& e) {
            e.discard_as_unraisable("libetude._native: finding the error class");
            PyErr_SetString(PyExc_RuntimeError, f.message.c_str());
            return;
        }
        PyErr_SetString(cls.ptr(), f.message.c_str());
    }
}

using Block = nb::ndarray<nb::numpy, float, nb::ndim<1>>;
using Buffer = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Hands `samples` to numpy without a copy: the array owns the vector.
Block to_numpy(std::vector<float>&& samples) {
    auto* owned = new std::vector<float>(std::move(samples));
    if (owned->capacity() == 0) owned->reserve(1);  // a valid pointer for an empty block
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    return Block(owned->data(), {owned->size()}, owner);
}

// Stream::read() when timeout_ms < 0, else Stream::read_some().
std::size_t read_span(Stream& s, std::span<float> out, int timeout_ms) {
    return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                   [&] { return timeout_ms < 0 ? s.read(out) : s.read_some(out, timeout_ms); });
}

// StreamOptions and its table (engine/stream_options.h): the class's
// attributes are the table's fields, and STREAM_OPTIONS describes each for
// the package's keyword arguments (libetude/_engine.py), so that no list of
// options is written here or in Python. A StreamOptions is made for one
// kind of voice ("builtin", "piper", "mel": the alternative of its `voice`
// variant); setting an option of another kind is the engine's refusal
// (set_option()), reading one gives its default.
const char* python_type(const StreamOptionMember& member) {
    return std::visit(
        [](auto place) {
            using T = typename decltype(place)::type;
            if constexpr (std::is_same_v<T, std::string>) return "str";
            if constexpr (std::is_same_v<T, double>) return "float";
            if constexpr (std::is_same_v<T, bool>) return "bool";
            if constexpr (std::is_same_v<T, int>) return "int";
            if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
            if constexpr (std::is_same_v<T, std::optional<float>>) return "optional_float";
            if constexpr (std::is_same_v<T, SchedulingClass>) return "scheduling";
        },
        member);
}

constexpr std::pair<VoiceKind, const char*> kKindNames[] = {
    {VoiceKind::Builtin, "builtin"}, {VoiceKind::Piper, "piper"}, {VoiceKind::Mel, "mel"}};

const char* kind_name(VoiceKind kind) {
    for (const auto& [k, name] : kKindNames)
        if (k == kind) return name;
    return "builtin";
}

VoiceKind kind_named(const std::string& name) {
    for (const auto& [k, n] : kKindNames)
        if (name == n) return k;
    throw etude::Error("a stream's kind of voice is builtin, piper or mel, not '" + name + "'");
}

// A field's value in `o`, or its default where o's kind has no such field.
template <class T>
const T& option_value(const StreamOptions& o, const StreamOptionField& f) {
    const auto& place = std::get<StreamOptionPlace<T>>(f.member);
    if (const T* v = place.in(o)) return *v;
    for (const auto& [k, name] : kKindNames)
        if (f.kinds & static_cast<etude::engine::VoiceKinds>(k))
            return *place.in(etude::engine::default_options(k));
    throw etude::Error(std::string(f.name) + " applies to no kind of voice");
}

void bind_stream_options(nb::module_& m) {
    nb::enum_<SchedulingClass>(m, "SchedulingClass",
                               "Who waits for a stream's audio (engine/stream_options.h).")
        .value("live", SchedulingClass::Live)
        .value("network", SchedulingClass::Network)
        .value("offline", SchedulingClass::Offline);
    auto options = nb::class_<StreamOptions>(m, "StreamOptions",
                                             "How a stream speaks (engine/stream_options.h).");
    options.def(
        "__init__",
        [](StreamOptions* self, const std::string& kind) {
            const VoiceKind k =
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { return kind_named(kind); });
            new (self) StreamOptions(etude::engine::default_options(k));
        },
        "kind"_a = "builtin", "Every option at its default, for a voice of `kind`.");
    options.def_prop_ro(
        "kind", [](const StreamOptions& o) { return kind_name(etude::engine::voice_kind(o)); },
        "builtin, piper or mel: the kind of voice the options are for.");
    nb::dict table;
    for (const auto& f : etude::engine::stream_option_fields()) {
        const StreamOptionField* field = &f;  // the table lives as long as the process
        std::visit(
            [&](auto place) {
                using T = typename decltype(place)::type;
                options.def_prop_rw(
                    f.name, [field](const StreamOptions& o) { return option_value<T>(o, *field); },
                    [field](StreamOptions& o, T value) {
                        guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                                [&] { etude::engine::set_option(o, *field, std::move(value)); });
                    });
            },
            f.member);
        std::vector<std::string> kinds;
        for (const auto& [k, name] : kKindNames)
            if (f.kinds & static_cast<etude::engine::VoiceKinds>(k)) kinds.push_back(name);
        nb::object value = std::visit(
            [&](auto place) -> nb::object {
                using T = typename decltype(place)::type;
                return nb::cast(option_value<T>(StreamOptions{}, f));
            },
            f.member);
        table[f.name] = nb::make_tuple(python_type(f.member), kinds, value, f.names_the_voice);
    }
    m.attr("STREAM_OPTIONS") = table;
    m.def(
        "stream_option",
        [](const std::string& name) {
            guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                    [&] { etude::engine::stream_option_field(name); });
        },
        "name"_a, "Raises InvalidArgument, naming the options there are, for an unknown name.");
}

void bind_types(nb::module_& m) {
    nb::class_<VoiceInfo>(m, "VoiceInfo", "A voice and its facts (list_voices, find_voice).")
        .def(nb::init<>())
        .def_rw("name", &VoiceInfo::name)
        .def_rw("kind", &VoiceInfo::kind)
        .def_rw("description", &VoiceInfo::description)
        .def_rw("dataset", &VoiceInfo::dataset)
        .def_rw("attribution_name", &VoiceInfo::attribution_name)
        .def_rw("attribution_url", &VoiceInfo::attribution_url)
        .def_rw("version", &VoiceInfo::version)
        .def_rw("length_scale", &VoiceInfo::length_scale)
        .def_rw("problem", &VoiceInfo::problem)
        .def_rw("model_path", &VoiceInfo::model_path)
        .def_rw("language", &VoiceInfo::language)
        .def_rw("quality", &VoiceInfo::quality)
        .def_rw("sample_rate", &VoiceInfo::sample_rate)
        .def_rw("speakers", &VoiceInfo::speakers);

    bind_stream_options(m);

    nb::class_<EngineCapacity>(m, "EngineCapacity",
                               "The real-time streams a machine holds (Engine.capacity).")
        .def_ro("speed", &EngineCapacity::speed)
        .def_ro("streams_measured", &EngineCapacity::streams_measured)
        .def_ro("streams", &EngineCapacity::streams)
        .def_ro("device", &EngineCapacity::device)
        .def_ro("device_error", &EngineCapacity::device_error)
        .def_ro("launch_ns", &EngineCapacity::launch_ns)
        .def_ro("frame_ns", &EngineCapacity::frame_ns)
        .def_ro("chunk_frames", &EngineCapacity::chunk_frames)
        .def_ro("largest_batch_timed", &EngineCapacity::largest_batch_timed)
        .def_ro("batch_streams", &EngineCapacity::batch_streams)
        .def_ro("device_streams", &EngineCapacity::device_streams)
        .def_ro("host_speed", &EngineCapacity::host_speed)
        .def_ro("host_streams", &EngineCapacity::host_streams);
    nb::class_<FirstAudioMeasure>(
        m, "FirstAudioMeasure",
        "How soon each of several streams started together is heard (Engine.first_audio).")
        .def_ro("streams", &FirstAudioMeasure::streams)
        .def_ro("median_ms", &FirstAudioMeasure::median_ms)
        .def_ro("last_ms", &FirstAudioMeasure::last_ms);
    m.attr("MOST_STARTED_TOGETHER") = Engine::kMostStartedTogether;
    // engine/error.h's table, from which libetude._errors takes its codes.
    nb::list statuses;
    for (const auto& s : etude::kFailureStatuses)
        statuses.append(nb::make_tuple(int(s.status), s.c_name, s.python_class));
    m.attr("FAILURE_STATUSES") = statuses;
    nb::class_<StreamStats>(m, "StreamStats", "A snapshot of a stream's counters.")
        .def_ro("samples_delivered", &StreamStats::samples_delivered)
        .def_ro("underruns", &StreamStats::underruns)
        .def_ro("underrun_samples", &StreamStats::underrun_samples)
        .def_ro("sentences_queued", &StreamStats::sentences_queued)
        .def_ro("sentences_spoken", &StreamStats::sentences_spoken)
        .def_ro("sentences_dropped", &StreamStats::sentences_dropped)
        .def_ro("sentences_unspeakable", &StreamStats::sentences_unspeakable)
        .def_ro("unspeakable_reason", &StreamStats::unspeakable_reason)
        .def_ro("frames_vocoded", &StreamStats::frames_vocoded)
        .def_ro("cancels", &StreamStats::cancels)
        .def_ro("first_audio_ms", &StreamStats::first_audio_ms)
        .def_ro("frontend_seconds", &StreamStats::frontend_seconds)
        .def_ro("vocoder_seconds", &StreamStats::vocoder_seconds)
        .def_ro("blocks", &StreamStats::blocks)
        .def_ro("blocks_primary", &StreamStats::blocks_primary)
        .def_ro("blocks_fallback", &StreamStats::blocks_fallback)
        .def_ro("blocks_ahead", &StreamStats::blocks_ahead)
        .def_ro("fallbacks", &StreamStats::fallbacks)
        .def_ro("late_blocks", &StreamStats::late_blocks)
        .def_ro("reduced_tier_blocks", &StreamStats::reduced_tier_blocks)
        .def_ro("blocks_gpu", &StreamStats::blocks_gpu)
        .def_ro("latency_ms", &StreamStats::latency_ms)
        .def_ro("vocoder", &StreamStats::vocoder)
        .def_ro("gpu_device", &StreamStats::gpu_device)
        .def_ro("gpu_note", &StreamStats::gpu_note)
        .def_ro("gpu_failures", &StreamStats::gpu_failures)
        .def_ro("gpu_disabled", &StreamStats::gpu_disabled)
        .def_ro("gpu_ready", &StreamStats::gpu_ready)
        .def_ro("gpu_last_error", &StreamStats::gpu_last_error)
        .def_ro("gpu_batches", &StreamStats::gpu_batches)
        .def_ro("gpu_batched_jobs", &StreamStats::gpu_batched_jobs)
        .def_ro("gpu_largest_batch", &StreamStats::gpu_largest_batch)
        .def_ro("realtime_workers", &StreamStats::realtime_workers)
        .def_ro("model", &StreamStats::model)
        .def_ro("mel_frames", &StreamStats::mel_frames)
        .def_ro("mel_chunks_gpu", &StreamStats::mel_chunks_gpu)
        .def_ro("mel_chunks_cpu", &StreamStats::mel_chunks_cpu)
        .def_ro("mel_chunks_phase", &StreamStats::mel_chunks_phase)
        .def_ro("model_latency_ms", &StreamStats::model_latency_ms)
        .def_ro("flow_pushes_gpu", &StreamStats::flow_pushes_gpu)
        .def_ro("flow_pushes_cpu", &StreamStats::flow_pushes_cpu)
        .def_ro("flow_takeovers", &StreamStats::flow_takeovers)
        .def_ro("flow_pushes_batched", &StreamStats::flow_pushes_batched)
        .def_ro("analyses_gpu", &StreamStats::analyses_gpu)
        .def_ro("analyses_cpu", &StreamStats::analyses_cpu)
        .def_ro("analyses_near_tie", &StreamStats::analyses_near_tie)
        .def_ro("analyses_batched", &StreamStats::analyses_batched)
        .def_ro("marks", &StreamStats::marks)
        .def_ro("marks_dropped", &StreamStats::marks_dropped)
        .def_ro("words_unpaired", &StreamStats::words_unpaired);
}

void bind_stream(nb::module_& m) {
    nb::class_<Stream>(m, "Stream", "One voice at one output rate (Engine.create_stream).")
        .def(
            "push_text",
            [](Stream& s, nb::bytes text) {
                const std::string_view utf8(text.c_str(), text.size());
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_TEXT, [&] { return s.push_text(utf8); });
            },
            "text"_a, "Queues UTF-8 text; returns the sentences it queued.")
        .def(
            "end_input",
            [](Stream& s) {
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_TEXT, [&] { return s.end_input(); });
            },
            "Releases the held sentence; returns the sentences it queued.")
        .def(
            "push_ssml",
            [](Stream& s, nb::bytes ssml) {
                const std::string_view utf8(ssml.c_str(), ssml.size());
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_TEXT, [&] { return s.push_ssml(utf8); });
            },
            "ssml"_a, "Queues an SSML document; returns the sentences it queued.")
        .def(
            "push_mark",
            [](Stream& s, const std::string& name) {
                nb::gil_scoped_release nogil;  // waits for a push's split
                guarded(ETUDE_ERROR_INVALID_TEXT, [&] { s.push_mark(name); });
            },
            "name"_a, "Queues a mark after the text so far (it ends the held sentence).")
        .def(
            "push_break",
            [](Stream& s, double ms) {
                nb::gil_scoped_release nogil;  // waits for a push's split
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.push_break(ms); });
            },
            "ms"_a, "Queues that much silence after the text so far (0..60000 ms).")
        .def(
            "set_prosody",
            [](Stream& s, float rate, float pitch, float range, float volume) {
                Prosody p;
                p.rate = rate;
                p.pitch = pitch;
                p.range = range;
                p.volume = volume;
                nb::gil_scoped_release nogil;  // waits for a push's split
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.set_prosody(p); });
            },
            "rate"_a, "pitch"_a, "range"_a, "volume"_a,
            "The prosody of the text pushed from now on.")
        .def(
            "report_words", [](Stream& s, bool on) { s.report_words(on); }, "on"_a,
            "Also hand out each written word's start as a mark (for the text pushed after it).")
        .def(
            "next_mark",
            [](Stream& s) -> std::optional<std::tuple<bool, std::string, std::uint64_t>> {
                SpeechMark m;
                if (!s.next_mark(m)) return std::nullopt;
                return std::make_tuple(m.kind == SpeechMark::Word, std::string(m.name), m.sample);
            },
            "The next mark reached: (is_word, name, sample), or None.")
        .def("position", &Stream::position, "Samples consumed so far (padding excluded).")
        .def(
            "push_phoneme_ids",
            [](Stream& s, std::vector<std::int64_t> ids) {
                nb::gil_scoped_release nogil;
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.push_phoneme_ids(ids); });
            },
            "ids"_a, "Piper streams: queues one sentence as the voice's phoneme ids.")
        .def(
            "read",
            [](Stream& s, Buffer out) {
                const std::span<float> span(out.data(), out.shape(0));
                nb::gil_scoped_release nogil;
                return read_span(s, span, -1);
            },
            "out"_a.noconvert(), "Blocking: fills `out`; fewer only at the end, 0 when done.")
        .def(
            "read_some",
            [](Stream& s, Buffer out, int timeout_ms) {
                const std::span<float> span(out.data(), out.shape(0));
                nb::gil_scoped_release nogil;
                return read_span(s, span, timeout_ms < 0 ? 0 : timeout_ms);
            },
            "out"_a.noconvert(), "timeout_ms"_a,
            "Copies what is ready within `timeout_ms` into `out`; 0 when none came.")
        .def(
            "read_block",
            [](Stream& s, std::size_t max_frames, int timeout_ms) {
                std::vector<float> samples;
                {
                    nb::gil_scoped_release nogil;
                    samples.resize(max_frames);
                    samples.resize(read_span(s, samples, timeout_ms));
                }
                return to_numpy(std::move(samples));
            },
            "max_frames"_a, "timeout_ms"_a,
            "read() (timeout_ms < 0) or read_some() into a new array it owns, no copy.")
        .def(
            "cancel",
            [](Stream& s) {
                nb::gil_scoped_release nogil;
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.cancel(); });
            },
            "Stops speaking with a short fade and drops queued and held text; any thread.")
        .def(
            "set_voice",
            [](Stream& s, const std::string& voice) {
                nb::gil_scoped_release nogil;  // waits for a push's split
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.set_voice(voice); });
            },
            "voice"_a)
        .def(
            "write_trace",
            [](const Stream& s, const std::string& path) {
                nb::gil_scoped_release nogil;
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { s.write_trace(path); });
            },
            "path"_a, "Writes the block records as a Chrome trace (JSON).")
        // Both take the lock the producer writes under.
        .def("busy", &Stream::busy, nb::call_guard<nb::gil_scoped_release>())
        .def("latency_ms", &Stream::latency_ms)
        .def("sample_rate", &Stream::sample_rate)
        .def("voice", &Stream::voice)
        .def("stats", &Stream::stats, nb::call_guard<nb::gil_scoped_release>());
}

void bind_engine(nb::module_& m) {
    nb::class_<Engine>(m, "Engine", "Loads voices and owns the workers; makes streams.")
        .def(
            "__init__",
            [](Engine* self, std::vector<std::string> preload_voices, std::string preload_backend,
               int preload_device, const std::string& precision) {
                Engine::Options options;
                options.preload_voices = std::move(preload_voices);
                options.preload_backend = std::move(preload_backend);
                options.preload_device = preload_device;
                nb::gil_scoped_release nogil;
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] {
                    // The caller's value: an etude::Error, as a bad voice name is.
                    try {
                        options.device_precision = etude::engine::parse_device_precision(precision);
                    } catch (const std::invalid_argument& e) {
                        throw etude::Error(e.what());
                    }
                    new (self) Engine(std::move(options));
                });
            },
            "preload_voices"_a = std::vector<std::string>{"slt"}, "preload_backend"_a = "auto",
            "preload_device"_a = -1, "precision"_a = "fp32")
        .def(
            "preload_voice",
            [](Engine& e, const std::string& voice) {
                nb::gil_scoped_release nogil;
                guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { e.preload_voice(voice); });
            },
            "voice"_a)
        .def_static("voices", &Engine::voices, "The embedded voices: slt, rms, awb.")
        .def_static(
            "describe_voice",
            [](const std::string& name_or_path) {
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                               [&] { return Engine::describe_voice(name_or_path); });
            },
            "name_or_path"_a, "The Piper voice a name or path names, read from its files.")
        .def(
            "measure_capacity",
            [](Engine& e, const StreamOptions& options, int at_once) {
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                               [&] { return e.measure_capacity(options, at_once); });
            },
            "options"_a, "at_once"_a = 0)
        .def(
            "measure_first_audio",
            [](Engine& e, const StreamOptions& options, int streams) {
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                               [&] { return e.measure_first_audio(options, streams); });
            },
            "options"_a, "streams"_a)
        // The stream keeps its engine alive: the C++ engine must outlive it.
        .def(
            "create_stream",
            [](Engine& e, const StreamOptions& options) {
                nb::gil_scoped_release nogil;
                return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                               [&] { return e.create_stream(options); });
            },
            "options"_a, nb::keep_alive<0, 1>());
}

// ---- voices: the engine's one list of voices and their facts ---------------
// (Engine::list_voices, find_voice, voice_folders). Module functions, so that
// libetude._voices asks the engine instead of repeating its folder rules.
void bind_voices(nb::module_& m) {
    nb::enum_<VoiceInfo::Kind>(m, "VoiceKind", "What speaks a voice.")
        .value("builtin", VoiceInfo::Kind::Builtin)
        .value("piper", VoiceInfo::Kind::Piper);
    m.def(
        "list_voices",
        [] {
            nb::gil_scoped_release nogil;
            return guarded(ETUDE_ERROR_INVALID_ARGUMENT, [] { return Engine::list_voices(); });
        },
        "Every voice: the built-in ones, then the voice folders' Piper voices "
        "(one whose config cannot be read has `problem` set).");
    m.def(
        "find_voice",
        [](const std::string& name_or_path) {
            nb::gil_scoped_release nogil;
            return guarded(ETUDE_ERROR_INVALID_ARGUMENT,
                           [&] { return Engine::find_voice(name_or_path); });
        },
        "name_or_path"_a,
        "The voice a built-in name, a Piper voice's path or a name in the voice folders "
        "names; None when there is none.");
    m.def("voice_folders", &Engine::voice_folders,
          "The folders searched for Piper voices by name, in order.");
    m.def(
        "set_espeak_data",
        [](const std::string& folder) {
            guarded(ETUDE_ERROR_INVALID_ARGUMENT, [&] { Engine::set_espeak_data(folder); });
        },
        "folder"_a,
        "Where espeak-ng reads its data (an espeak-ng-data folder), before the first "
        "Piper voice loads; the package names the copy inside the wheel.");
}

}  // namespace

NB_MODULE(_native, m) {
    m.doc() = "LibEtude's C++ API (engine/engine.h); use the libetude package instead.";
    nb::register_exception_translator(translate);
    bind_types(m);
    bind_stream(m);
    bind_engine(m);
    bind_voices(m);
}
