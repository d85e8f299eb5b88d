#include "engine/stream_options.h"

#include <string>
#include <utility>

#include "engine/error.h"

namespace etude::engine {
namespace {

constexpr VoiceKinds kBuiltin = static_cast<VoiceKinds>(VoiceKind::Builtin);
constexpr VoiceKinds kPiper = static_cast<VoiceKinds>(VoiceKind::Piper);
constexpr VoiceKinds kMel = static_cast<VoiceKinds>(VoiceKind::Mel);
constexpr VoiceKinds kEvery = kBuiltin | kPiper | kMel;

// In the order of StreamOptions (tests/engine/stream_options_test.cpp checks
// that these tile the struct). The kinds are those the engine reads each
// field for; allow_reduced_tier is every kind's because a server tells
// every stream not to reduce, and only built-in voices have a tier to skip.
using O = StreamOptions;
const StreamOptionField kFields[] = {
    {"voice", kBuiltin, true, &O::voice},
    {"sample_rate", kEvery, false, &O::sample_rate},
    {"latency_ms", kEvery, false, &O::latency_ms},
    {"block_ms", kBuiltin, false, &O::block_ms},
    {"cancel_fade_ms", kEvery, false, &O::cancel_fade_ms},
    {"render_ahead", kBuiltin, false, &O::render_ahead},
    {"allow_reduced_tier", kEvery, false, &O::allow_reduced_tier},
    {"scheduling", kEvery, false, &O::scheduling},
    {"realtime_workers", kEvery, false, &O::realtime_workers},
    {"vocoder", kBuiltin, false, &O::vocoder},
    {"backend", kEvery, false, &O::backend},
    {"device", kEvery, false, &O::device},
    {"faults", kEvery, false, &O::faults},
    {"wait_for_device", kEvery, false, &O::wait_for_device},
    {"model", kMel, true, &O::model},
    {"cpu_model", kMel, false, &O::cpu_model},
    {"allow_phase_fallback", kMel, false, &O::allow_phase_fallback},
    {"piper_voice", kPiper, true, &O::piper_voice},
    {"speaker", kPiper, false, &O::speaker},
    {"noise_scale", kPiper, false, &O::noise_scale},
    {"length_scale", kBuiltin | kPiper, false, &O::length_scale},
    {"noise_w", kPiper, false, &O::noise_w},
    {"seed", kPiper, false, &O::seed},
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

bool at_default(const StreamOptions& options, const StreamOptionMember& member) {
    static const StreamOptions defaults;
    return std::visit([&](auto m) { return options.*m == defaults.*m; }, member);
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

VoiceKind voice_kind(const StreamOptions& options) {
    if (!options.piper_voice.empty()) return VoiceKind::Piper;
    if (!options.model.empty()) return VoiceKind::Mel;
    return VoiceKind::Builtin;
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

void check_options_apply(const StreamOptions& options) {
    if (!options.piper_voice.empty() && !options.model.empty())
        throw Error("a stream speaks a Piper voice or vocodes mel frames, not both");
    const VoiceKind kind = voice_kind(options);
    const std::string& named = kind == VoiceKind::Piper ? options.piper_voice
                               : kind == VoiceKind::Mel ? options.model
                                                        : options.voice;
    for (const auto& f : kFields) {
        if ((f.kinds & static_cast<VoiceKinds>(kind)) || at_default(options, f.member)) continue;
        throw Error(std::string(f.name) + " applies to " + kinds_text(f.kinds) + "; '" + named +
                    "' is " + describe(kind));
    }
}

}  // namespace etude::engine
