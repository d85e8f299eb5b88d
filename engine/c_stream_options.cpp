#include "engine/c_stream_options.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "engine/error.h"

namespace etude::engine {
namespace {

constexpr std::size_t size_of(CType t) {
    switch (t) {
        case CType::String:
            return sizeof(const char*);
        case CType::UnsetFloat:
            return sizeof(float);
        case CType::Double:
            return sizeof(double);
        case CType::Int:
            return sizeof(int);
        case CType::Uint64:
            return sizeof(std::uint64_t);
        case CType::Flag:
            return sizeof(int);
        case CType::Scheduling:
            return sizeof(etude_scheduling);
    }
    return 0;
}

// The fields leave no gap between struct_size and the struct's end: a
// field added to the C struct without its entry here fails the build.
template <class Struct, std::size_t N>
constexpr bool tiles(const CField (&fields)[N]) {
    std::size_t end = sizeof(std::size_t);  // struct_size
    for (const CField& f : fields) {
        const std::size_t size = size_of(f.type);
        if (f.offset != (end + size - 1) / size * size) return false;
        end = f.offset + size;
    }
    return (end + alignof(Struct) - 1) / alignof(Struct) * alignof(Struct) == sizeof(Struct);
}

using Piper = etude_piper_stream_options;
constexpr CField kPiper[] = {
    {"voice", "piper_voice", offsetof(Piper, voice), CType::String},
    {"speaker", "speaker", offsetof(Piper, speaker), CType::String},
    {"noise_scale", "noise_scale", offsetof(Piper, noise_scale), CType::UnsetFloat},
    {"length_scale", "length_scale", offsetof(Piper, length_scale), CType::UnsetFloat},
    {"noise_w", "noise_w", offsetof(Piper, noise_w), CType::UnsetFloat},
    {"seed", "seed", offsetof(Piper, seed), CType::Uint64},
    {"backend", "backend", offsetof(Piper, backend), CType::String},
    {"device", "device", offsetof(Piper, device), CType::Int},
    {"sample_rate", "sample_rate", offsetof(Piper, sample_rate), CType::Double},
    {"latency_ms", "latency_ms", offsetof(Piper, latency_ms), CType::Double},
    {"scheduling", "scheduling", offsetof(Piper, scheduling), CType::Scheduling},
    {"sentence_silence_ms", "sentence_silence_ms", offsetof(Piper, sentence_silence_ms),
     CType::Double},
};
static_assert(tiles<Piper>(kPiper), "etude_piper_stream_options has a field not listed here");

using Mel = etude_mel_stream_options;
constexpr CField kMel[] = {
    {"model_path", "model", offsetof(Mel, model_path), CType::String},
    {"backend", "backend", offsetof(Mel, backend), CType::String},
    {"device", "device", offsetof(Mel, device), CType::Int},
    {"cpu_model_path", "cpu_model", offsetof(Mel, cpu_model_path), CType::String},
    {"allow_phase_fallback", "allow_phase_fallback", offsetof(Mel, allow_phase_fallback),
     CType::Flag},
    {"sample_rate", "sample_rate", offsetof(Mel, sample_rate), CType::Double},
    {"scheduling", "scheduling", offsetof(Mel, scheduling), CType::Scheduling},
};
static_assert(tiles<Mel>(kMel), "etude_mel_stream_options has a field not listed here");

template <class T>
T load(const void* base, std::size_t offset) {
    T v;
    std::memcpy(&v, static_cast<const char*>(base) + offset, sizeof v);
    return v;
}

template <class T>
void store(void* base, std::size_t offset, T v) {
    std::memcpy(static_cast<char*>(base) + offset, &v, sizeof v);
}

// The C value of one StreamOptions value. Strings point into `from`, which
// must outlive the C struct.
void write_field(void* out, const CField& f, const StreamOptions& from) {
    std::visit(
        [&](auto place) {
            const auto& v = *place.in(from);
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                store<const char*>(out, f.offset, v.empty() ? nullptr : v.c_str());
            else if constexpr (std::is_same_v<T, std::optional<float>>)
                store<float>(out, f.offset, v.value_or(-1.0f));
            else if constexpr (std::is_same_v<T, bool>)
                store<int>(out, f.offset, v ? 1 : 0);
            else if constexpr (std::is_same_v<T, SchedulingClass>)
                store<etude_scheduling>(out, f.offset, static_cast<etude_scheduling>(v));
            else
                store<T>(out, f.offset, v);
        },
        stream_option_field(f.option).member);
}

void read_field(const void* in, const CField& f, StreamOptions& into) {
    const StreamOptionField& field = stream_option_field(f.option);
    std::visit(
        [&](auto place) {
            auto* target = place.in(into);
            if (!target) refuse_option(field, into);  // a test checks each CField's kind
            auto& v = *target;
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                if (const char* s = load<const char*>(in, f.offset)) v = s;
            } else if constexpr (std::is_same_v<T, std::optional<float>>) {
                const float x = load<float>(in, f.offset);
                v = x < 0.0f ? std::optional<float>() : x;
            } else if constexpr (std::is_same_v<T, bool>) {
                v = load<int>(in, f.offset) != 0;
            } else if constexpr (std::is_same_v<T, SchedulingClass>) {
                const int s = load<int>(in, f.offset);
                if (s < ETUDE_SCHEDULING_LIVE || s > ETUDE_SCHEDULING_OFFLINE)
                    throw Error("options->scheduling is " + std::to_string(s) +
                                ": ETUDE_SCHEDULING_LIVE, _NETWORK or _OFFLINE");
                v = static_cast<SchedulingClass>(s);
            } else {
                v = load<T>(in, f.offset);
            }
        },
        field.member);
}

static_assert(int(SchedulingClass::Live) == ETUDE_SCHEDULING_LIVE &&
              int(SchedulingClass::Network) == ETUDE_SCHEDULING_NETWORK &&
              int(SchedulingClass::Offline) == ETUDE_SCHEDULING_OFFLINE);

}  // namespace

CStruct c_piper_options() {
    return {kPiper, VoiceKind::Piper};
}

CStruct c_mel_options() {
    return {kMel, VoiceKind::Mel};
}

void fill_c_defaults(void* options, std::size_t struct_size, CStruct c, std::size_t full_size,
                     double sample_rate) {
    if (!options || struct_size == 0) return;
    // Its strings outlive every caller's struct.
    const StreamOptions& defaults = default_options(c.kind);
    const std::size_t reach = std::min(struct_size, full_size);
    std::memset(options, 0, reach);
    store<std::size_t>(options, 0, reach);
    for (const CField& f : c.fields) {
        if (f.offset + size_of(f.type) > reach) break;
        if (std::string_view(f.option) == "sample_rate")
            store<double>(options, f.offset, sample_rate);
        else
            write_field(options, f, defaults);
    }
}

StreamOptions read_c_options(const void* options, std::size_t struct_size, CStruct c) {
    StreamOptions o = default_options(c.kind);
    for (const CField& f : c.fields)
        if (f.offset + size_of(f.type) <= struct_size) read_field(options, f, o);
    return o;
}

}  // namespace etude::engine
