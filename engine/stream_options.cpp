#include "engine/stream_options.h"

#include <cmath>
#include <string>
#include <utility>

#include "engine/error.h"

namespace etude::engine {
namespace {

constexpr VoiceKinds kBuiltin = static_cast<VoiceKinds>(VoiceKind::Builtin);
constexpr VoiceKinds kPiper = static_cast<VoiceKinds>(VoiceKind::Piper);
constexpr VoiceKinds kMel = static_cast<VoiceKinds>(VoiceKind::Mel);

using O = StreamOptions;
using B = BuiltinVoiceOptions;
using P = PiperVoiceOptions;
using M = MelVoiceOptions;

// A row; its kinds are those whose struct has the field.
template <class T>
constexpr StreamOptionField row(const char* name, StreamOptionPlace<T> place,
                                bool names_the_voice = false) {
    return {name, place.kinds(), names_the_voice, place};
}
template <class T>
constexpr StreamOptionPlace<T> common(T O::*m) {
    return {.common = m};
}
template <class T>
constexpr StreamOptionPlace<T> builtin(T B::*m) {
    return {.builtin = m};
}
template <class T>
constexpr StreamOptionPlace<T> piper(T P::*m) {
    return {.piper = m};
}
template <class T>
constexpr StreamOptionPlace<T> mel(T M::*m) {
    return {.mel = m};
}

// StreamOptions' fields, then each alternative's, in the order declared
// (tests/engine/stream_options_test.cpp checks that these tile the structs).
// allow_reduced_tier is every stream's because a server tells every stream
// not to reduce, though only built-in voices have a tier to skip.
const StreamOptionField kFields[] = {
    row("sample_rate", common(&O::sample_rate)),
    row("latency_ms", common(&O::latency_ms)),
    row("cancel_fade_ms", common(&O::cancel_fade_ms)),
    row("allow_reduced_tier", common(&O::allow_reduced_tier)),
    row("scheduling", common(&O::scheduling)),
    row("realtime_workers", common(&O::realtime_workers)),
    row("backend", common(&O::backend)),
    row("device", common(&O::device)),
    row("faults", common(&O::faults)),
    row("wait_for_device", common(&O::wait_for_device)),
    row("voice", builtin(&B::voice), true),
    row("block_ms", builtin(&B::block_ms)),
    row("render_ahead", builtin(&B::render_ahead)),
    row("vocoder", builtin(&B::vocoder)),
    row("length_scale", StreamOptionPlace<std::optional<float>>{.builtin = &B::length_scale,
                                                                .piper = &P::length_scale}),
    row("piper_voice", piper(&P::piper_voice), true),
    row("speaker", piper(&P::speaker)),
    row("noise_scale", piper(&P::noise_scale)),
    row("noise_w", piper(&P::noise_w)),
    row("seed", piper(&P::seed)),
    row("sentence_silence_ms", piper(&P::sentence_silence_ms)),
    row("model", mel(&M::model), true),
    row("cpu_model", mel(&M::cpu_model)),
    row("allow_phase_fallback", mel(&M::allow_phase_fallback)),
};

// "Piper voices", "built-in and Piper voices", ...
std::string kinds_text(VoiceKinds kinds) {
    std::string out;
    const std::pair<VoiceKinds, const char*> names[] = {
        {kBuiltin, "built-in"}, {kPiper, "Piper"}, {kMel, "mel"}};
    int n = 0;
    for (const auto& [kind, name] : names) {
        if (!(kinds & kind)) continue;
        if (n++) out += " and ";
        out += name;
    }
    return out + (kinds == kMel ? " streams" : " voices");
}

}  // namespace

std::span<const StreamOptionField> stream_option_fields() {
    return kFields;
}

const StreamOptionField& stream_option_field(std::string_view name) {
    for (const auto& f : kFields)
        if (name == f.name) return f;
    std::string names;
    for (const auto& f : kFields) names += (names.empty() ? "" : ", ") + std::string(f.name);
    throw Error("unknown stream option '" + std::string(name) + "' (the options are: " + names +
                ")");
}

const std::string& voice_name(const StreamOptions& options) {
    return std::visit(
        [](const auto& v) -> const std::string& {
            using V = std::remove_cvref_t<decltype(v)>;
            if constexpr (std::is_same_v<V, BuiltinVoiceOptions>)
                return v.voice;
            else if constexpr (std::is_same_v<V, PiperVoiceOptions>)
                return v.piper_voice;
            else
                return v.model;
        },
        options.voice);
}

VoiceKind voice_kind(const StreamOptions& options) {
    switch (options.voice.index()) {
        case 1:
            return VoiceKind::Piper;
        case 2:
            return VoiceKind::Mel;
        default:
            return VoiceKind::Builtin;
    }
}

const StreamOptions& default_options(VoiceKind kind) {
    static const StreamOptions builtin;
    static const StreamOptions piper{.voice = PiperVoiceOptions{}};
    static const StreamOptions mel{.voice = MelVoiceOptions{}};
    return kind == VoiceKind::Piper ? piper : kind == VoiceKind::Mel ? mel : builtin;
}

const char* describe(VoiceKind kind) {
    switch (kind) {
        case VoiceKind::Builtin:
            return "a built-in voice";
        case VoiceKind::Piper:
            return "a Piper voice";
        case VoiceKind::Mel:
            return "a mel stream";
    }
    return "a voice";
}

const char* piper_scale_unmet(std::string_view field, double value) {
    // A pace of 0 would make every phoneme last no time; no noise is a
    // voice's deterministic output.
    if (field == "length_scale")
        return std::isfinite(value) && value > 0.0 ? nullptr : "a finite number above 0";
    return std::isfinite(value) && value >= 0.0 ? nullptr : "a finite number of 0 or more";
}

const char* to_string(SchedulingClass scheduling) {
    switch (scheduling) {
        case SchedulingClass::Live:
            return "live";
        case SchedulingClass::Network:
            return "network";
        case SchedulingClass::Offline:
            return "offline";
    }
    return "live";
}

void refuse_option(const StreamOptionField& field, const StreamOptions& options) {
    throw Error(std::string(field.name) + " applies to " + kinds_text(field.kinds) + "; '" +
                voice_name(options) + "' is " + describe(voice_kind(options)));
}

}  // namespace etude::engine
