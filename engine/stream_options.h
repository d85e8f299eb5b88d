/// \file
/// How a stream speaks: StreamOptions, which holds what every stream reads
/// and, in a variant, what only its kind of voice reads; and the one table
/// of its fields (stream_option_fields()) that the rest derives from: the C
/// API's option structs (engine/etude.h) are read and filled through it,
/// and the Python package's keyword arguments are its names. docs/api.md
/// ("Stream options") shows the whole table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace etude::engine {

/// The kinds of voice a stream speaks: the alternatives of
/// StreamOptions::voice. Each has its own C options struct (built-in:
/// etude_stream_create(), Piper: etude_piper_stream_options, mel:
/// etude_mel_stream_options).
enum class VoiceKind : std::uint8_t {
    Builtin = 1,  ///< an embedded Flite voice (BuiltinVoiceOptions)
    Piper = 2,    ///< a Piper voice (PiperVoiceOptions)
    Mel = 4,      ///< mel frames through a neural vocoder (MelVoiceOptions)
};

/// Who waits for a stream's audio, which says how its work is scheduled.
enum class SchedulingClass : std::uint8_t {
    /// Someone hears it as it is made (an audio callback pulls it): its
    /// workers ask for SCHED_FIFO, and its work takes turns among the
    /// streams, earliest deadline first.
    Live,
    /// A client that buffers is sent it as it is made (a server's stream):
    /// no SCHED_FIFO, behind the live streams. Its work keeps the deadline
    /// order among the network streams: a new stream's first audio before
    /// the chunks of streams already well ahead of their listeners.
    Network,
    /// Read as fast as it comes (a file, a benchmark): no SCHED_FIFO, its
    /// work outside the order, behind everything someone listens to.
    Offline,
};

/// A stream of an embedded Flite voice, and what only such a stream reads.
struct BuiltinVoiceOptions {
    /// "slt", "rms" or "awb".
    std::string voice = "slt";
    /// The scheduling block (5..200 ms), in whole 5 ms vocoder frames.
    double block_ms = 10.0;
    /// Let engine workers vocode later sentences early.
    bool render_ahead = true;
    /// "mlsa": the exact CPU vocoder. "spectral": the frame-parallel
    /// vocoder, on the device StreamOptions::backend and
    /// StreamOptions::device choose (see gpu/registry.h), with the CPU
    /// processors as fallback.
    std::string vocoder = "mlsa";
    /// The speaking pace (larger: slower): Flite's duration stretch, 0.1
    /// to 10; unset: 1.
    std::optional<float> length_scale;
};

/// A stream of a Piper voice (docs/voices.md): push_text() goes through the
/// voice's own front end (espeak-ng phonemes) and network (VITS), and
/// StreamOptions::backend and StreamOptions::device say where the
/// decoder's GPU tier runs. A voice is read once per process and shared by
/// its streams.
struct PiperVoiceOptions {
    /// The voice (required): PATH/VOICE.onnx with VOICE.onnx.json beside
    /// it, the .json, or a name found in the voice folders.
    std::string piper_voice;
    /// A speaker by name (the voice's speaker_id_map) or id; empty: the
    /// voice's default.
    std::string speaker;
    /// The prior's noise, 0 or more; unset: the voice's own (its config's
    /// "inference" object, as for the next two).
    std::optional<float> noise_scale;
    /// The speaking pace (larger: slower), above 0.
    std::optional<float> length_scale;
    /// The durations' noise, 0 or more.
    std::optional<float> noise_w;
    /// Seeds the stream's noise generator. The same seed and text give the
    /// same audio, whether pulled live or read offline.
    std::uint64_t seed = 0;
    /// Silence between sentences, 0..60000 ms (Piper's --sentence-silence):
    /// before each sentence that follows another of the same input, from
    /// the stream's start or its last end_input() or cancel(); 0: none. A
    /// mark or prosody change inside a sentence, which cuts it, adds none.
    double sentence_silence_ms = 0.0;
};

/// A mel stream: mel frames, fed by push_mel() instead of push_text(),
/// through a neural vocoder. StreamOptions::backend and
/// StreamOptions::device say where its GPU tier runs; the output rate is
/// StreamOptions::sample_rate.
struct MelVoiceOptions {
    /// The neural vocoder (required): a LEF file from tools/convert.py.
    std::string model;
    /// Optional: a cheaper model of the same family for the CPU tier (e.g.
    /// HiFi-GAN V3 while V1 runs on the GPU); empty: `model` on the CPU too.
    std::string cpu_model;
    /// May the mel scheduler fall to phase reconstruction.
    bool allow_phase_fallback = true;
};

/// The voice of a stream, as one of its kinds (the alternatives, in the
/// order of VoiceKind), with the options only that kind reads.
using VoiceOptions = std::variant<BuiltinVoiceOptions, PiperVoiceOptions, MelVoiceOptions>;

/// How a stream speaks: voice, output rate, latency budget, device.
/// Engine::create_stream() checks it; the defaults make a 16 kHz stream with
/// the "slt" voice, the exact MLSA vocoder and a 100 ms latency budget.
///
/// An option only one kind of voice reads is a field of that kind's
/// alternative of `voice`, so it cannot be set on a stream of another kind;
/// the fields here are read for every kind.
struct StreamOptions {
    /// The voice, and what only its kind reads: which alternative it holds
    /// makes the stream built-in, Piper or mel.
    VoiceOptions voice;
    /// Output rate, 8000..192000 Hz; 0: the voice's own (16000 for the
    /// built-in voices, the model's for mel and Piper streams).
    double sample_rate = 16000.0;
    /// The latency the engine adds, from a block being produced to it being
    /// played (5..10000 ms): the scheduler keeps this much audio ready ahead
    /// of pull(), and every block's deadline follows from it. Fixed for the
    /// stream's life; a consumer that pulls more than half of it at once
    /// raises it to twice its pull size (see Stream::latency_ms()).
    double latency_ms = 100.0;
    double cancel_fade_ms = 5.0;  ///< fade length when speech is cancelled
    /// May the scheduler fall to the cheaper vocoder tier (only built-in
    /// voices have one; any stream may be told not to, as a server tells
    /// every stream).
    bool allow_reduced_tier = true;
    /// Who waits for the stream's audio, and so how its work is scheduled
    /// (SchedulingClass).
    SchedulingClass scheduling = SchedulingClass::Live;
    /// The older way to say the scheduling class: false schedules the
    /// stream as SchedulingClass::Network does, whatever `scheduling` says.
    bool realtime_workers = true;
    /// Where the GPU tier runs (a built-in voice's spectral vocoder, a
    /// Piper voice's decoder, a mel stream's model): auto, cpu, cuda,
    /// vulkan, opencl.
    std::string backend = "auto";
    int device = -1;  ///< device index within `backend`; -1: the best one
    /// Test and drill hook: faults to inject, in the vocabulary of the
    /// ETUDE_FAULT environment variable (which adds to it), e.g.
    /// "slow:0.05:30" (the primary processor 30 ms late on 5 % of its blocks)
    /// or "kernel:1:0:1500" (the GPU fails one operation after 1500); see
    /// docs/troubleshooting.md. Malformed text: create_stream() throws.
    std::string faults;
    /// create_stream() waits (up to 60 s) until the device has built its
    /// state and baked its FFT plans. Only a built-in voice's spectral
    /// vocoder waits today; other streams take it and start at once.
    /// Otherwise the CPU makes the blocks until the device is ready, which
    /// for a cold OpenCL device can take seconds.
    bool wait_for_device = false;
};

/// A set of VoiceKind values, as bits.
using VoiceKinds = std::uint8_t;

/// Where one field of the table lives: in StreamOptions itself (`common`,
/// read for every kind), or in each alternative of StreamOptions::voice
/// that has it (the others null).
template <class T>
struct StreamOptionPlace {
    using type = T;                             ///< the field's type
    T StreamOptions::*common = nullptr;         ///< a field of every stream
    T BuiltinVoiceOptions::*builtin = nullptr;  ///< a built-in voice's field
    T PiperVoiceOptions::*piper = nullptr;      ///< a Piper voice's field
    T MelVoiceOptions::*mel = nullptr;          ///< a mel stream's field

    /// The kinds of voice that have the field (VoiceKind bits).
    constexpr VoiceKinds kinds() const {
        if (common)
            return VoiceKinds(VoiceKind::Builtin) | VoiceKinds(VoiceKind::Piper) |
                   VoiceKinds(VoiceKind::Mel);
        return (builtin ? VoiceKinds(VoiceKind::Builtin) : 0) |
               (piper ? VoiceKinds(VoiceKind::Piper) : 0) | (mel ? VoiceKinds(VoiceKind::Mel) : 0);
    }
    /// The field in `options` (const or not); null when their kind of voice
    /// has none.
    template <class Options>
    auto* in(Options& options) const {
        using Out = std::conditional_t<std::is_const_v<Options>, const T, T>;
        if (common) return static_cast<Out*>(&(options.*common));
        return std::visit(
            [&](auto& v) -> Out* {
                using V = std::remove_cvref_t<decltype(v)>;
                if constexpr (std::is_same_v<V, BuiltinVoiceOptions>)
                    return builtin ? &(v.*builtin) : nullptr;
                else if constexpr (std::is_same_v<V, PiperVoiceOptions>)
                    return piper ? &(v.*piper) : nullptr;
                else
                    return mel ? &(v.*mel) : nullptr;
            },
            options.voice);
    }
};

/// Where a field of StreamOptions lives, of any of its types.
using StreamOptionMember =
    std::variant<StreamOptionPlace<std::string>, StreamOptionPlace<double>, StreamOptionPlace<bool>,
                 StreamOptionPlace<int>, StreamOptionPlace<std::uint64_t>,
                 StreamOptionPlace<std::optional<float>>, StreamOptionPlace<SchedulingClass>>;

/// One field of StreamOptions or of its voice's alternatives, as the table
/// describes it.
struct StreamOptionField {
    /// Its name: the member's, and the Python keyword argument's.
    const char* name;
    /// The kinds of voice it applies to (VoiceKind bits): those whose
    /// options have it.
    VoiceKinds kinds;
    /// It names the voice of its kind (voice, piper_voice, model): Python
    /// takes it as the `voice` argument, not by name.
    bool names_the_voice;
    /// Where it lives; its default is that of a new options struct of its
    /// kind (default_options()).
    StreamOptionMember member;
};

/// Every field: those of StreamOptions, then those of BuiltinVoiceOptions,
/// PiperVoiceOptions and MelVoiceOptions, each in the order declared, a
/// field two kinds share (length_scale) once, where it first appears (a
/// test checks that they cover the structs, so a field added without its
/// entry fails it).
std::span<const StreamOptionField> stream_option_fields();
/// The field called `name`. Throws etude::Error for an unknown name, listing
/// the names there are.
const StreamOptionField& stream_option_field(std::string_view name);
/// The kind of voice `options` speak: the alternative StreamOptions::voice
/// holds.
VoiceKind voice_kind(const StreamOptions& options);
/// What names the voice of `options`: the built-in voice's name, the Piper
/// voice's name or path, or the mel stream's model.
const std::string& voice_name(const StreamOptions& options);
/// A new StreamOptions of `kind`: every field at its default, the voice's
/// alternative new (for Piper and mel streams, without the voice named).
const StreamOptions& default_options(VoiceKind kind);
/// "a built-in voice", "a Piper voice" or "a mel stream".
const char* describe(VoiceKind kind);
/// "live", "network" or "offline": the Python package's and etude's names.
const char* to_string(SchedulingClass scheduling);
/// The one rule of a Piper voice's scales (PiperVoiceOptions::noise_scale,
/// length_scale and noise_w, named by `field`): what the scale must be, "a
/// finite number above 0" (length_scale) or "a finite number of 0 or more"
/// (the noises), when `value` is not one; nullptr when it is. The engine
/// checks a stream's scales by it, and `etude serve` its voices' options.
const char* piper_scale_unmet(std::string_view field, double value);
/// Throws etude::Error saying that `field` does not apply to the kind of
/// voice of `options`, e.g. "seed applies to Piper voices; 'slt' is a
/// built-in voice".
[[noreturn]] void refuse_option(const StreamOptionField& field, const StreamOptions& options);

/// Sets `field` of `options` to `value`, which must be of its type (else
/// std::bad_variant_access). Where
/// their kind of voice has no such field, a value at the field's default
/// asks for nothing and is dropped; another is refused (refuse_option()).
/// For the edges (C structs, Python keyword arguments) that set options by
/// name.
template <class T>
void set_option(StreamOptions& options, const StreamOptionField& field, T value) {
    const auto& place = std::get<StreamOptionPlace<T>>(field.member);
    if (T* target = place.in(options)) {
        *target = std::move(value);
        return;
    }
    for (VoiceKind k : {VoiceKind::Builtin, VoiceKind::Piper, VoiceKind::Mel})
        if (field.kinds & VoiceKinds(k)) {
            if (*place.in(default_options(k)) == value) return;
            break;
        }
    refuse_option(field, options);
}

}  // namespace etude::engine
