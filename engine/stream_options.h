/// \file
/// How a stream speaks: StreamOptions, and the one table of its fields
/// (stream_option_fields()) that the rest derives from: the C API's option
/// structs (engine/etude.h) are read and filled through it, the Python
/// package's keyword arguments are its names, and create_stream() checks
/// by it which options apply to the stream's kind of voice. docs/api.md
/// ("Stream options") shows the whole table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace etude::engine {

/// The kinds of voice a stream speaks; each has its own C options struct
/// (built-in: etude_stream_create(), Piper: etude_piper_stream_options, mel:
/// etude_mel_stream_options).
enum class VoiceKind : std::uint8_t {
    Builtin = 1,  ///< an embedded Flite voice (StreamOptions::voice)
    Piper = 2,    ///< a Piper voice (StreamOptions::piper_voice)
    Mel = 4,      ///< mel frames through a neural vocoder (StreamOptions::model)
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

/// How a stream speaks: voice, output rate, latency budget, vocoder and device.
/// Engine::create_stream() checks it; the defaults make a 16 kHz stream with
/// the "slt" voice, the exact MLSA vocoder and a 100 ms latency budget.
///
/// The fields set, of `voice`, `piper_voice` and `model`, choose the kind of
/// voice (voice_kind()); each other field applies to the kinds
/// stream_option_fields() names (in brackets below), and on a stream of
/// another kind it must keep its default: create_stream() refuses it
/// otherwise (check_options_apply()), in C++, C and Python alike.
struct StreamOptions {
    /// [built-in] "slt", "rms" or "awb": a built-in voice (see also
    /// piper_voice and model, which choose the other kinds).
    std::string voice = "slt";
    /// Output rate, 8000..192000 Hz; 0: the voice's own (16000 for the
    /// built-in voices, the model's for mel and Piper streams).
    double sample_rate = 16000.0;
    /// The latency the engine adds, from a block being produced to it being
    /// played (5..10000 ms): the scheduler keeps this much audio ready ahead
    /// of pull(), and every block's deadline follows from it. Fixed for the
    /// stream's life; a consumer that pulls more than half of it at once
    /// raises it to twice its pull size (see Stream::latency_ms()).
    double latency_ms = 100.0;
    /// [built-in] The scheduling block (5..200 ms), in whole 5 ms vocoder
    /// frames.
    double block_ms = 10.0;
    double cancel_fade_ms = 5.0;  ///< fade length when speech is cancelled
    bool render_ahead = true;     ///< [built-in] let engine workers vocode later sentences early
    /// May the scheduler fall to the cheaper vocoder tier (only built-in
    /// voices have one; any stream may be told not to).
    bool allow_reduced_tier = true;
    /// Who waits for the stream's audio, and so how its work is scheduled
    /// (SchedulingClass).
    SchedulingClass scheduling = SchedulingClass::Live;
    /// The older way to say the scheduling class: false schedules the
    /// stream as SchedulingClass::Network does, whatever `scheduling` says.
    bool realtime_workers = true;
    /// [built-in] "mlsa": the exact CPU vocoder. "spectral": the frame-parallel vocoder,
    /// on the device chosen by `backend`/`device` (see gpu/registry.h), with
    /// the CPU processors as fallback.
    std::string vocoder = "mlsa";
    std::string backend = "auto";  ///< auto, cpu, cuda, vulkan, opencl
    int device = -1;               ///< device index within `backend`; -1: the best one
    /// Test and drill hook: faults to inject, in the vocabulary of the
    /// ETUDE_FAULT environment variable (which adds to it), e.g.
    /// "slow:0.05:30" (the primary processor 30 ms late on 5 % of its blocks)
    /// or "kernel:1:0:1500" (the GPU fails one operation after 1500); see
    /// docs/troubleshooting.md. Malformed text: create_stream() throws.
    std::string faults;
    /// Spectral only: create_stream() waits (up to 60 s) until the device has
    /// built its state and baked its FFT plans. Otherwise the CPU makes the
    /// blocks until the device is ready, which for a cold OpenCL device can
    /// take seconds.
    bool wait_for_device = false;
    /// [mel] A neural vocoder (LEF file from tools/convert.py): makes this a mel
    /// stream, fed by push_mel() instead of push_text(). `backend`/`device`
    /// say where its GPU tier runs; the output rate is `sample_rate`.
    std::string model;
    /// [mel] Optional: a cheaper model of the same family for the CPU tier (e.g.
    /// HiFi-GAN V3 while V1 runs on the GPU); empty: `model` on the CPU too.
    std::string cpu_model;
    /// [mel] May the mel scheduler fall to phase reconstruction.
    bool allow_phase_fallback = true;
    /// [Piper] A Piper voice (docs/voices.md): PATH/VOICE.onnx with VOICE.onnx.json
    /// beside it, the .json, or a name found in the voice folders. Makes this
    /// a Piper stream: push_text() goes through the voice's own front end
    /// (espeak-ng phonemes) and network (VITS), `voice` is ignored, and
    /// `backend`/`device` say where the decoder's GPU tier runs. A voice is
    /// read once per process and shared by its streams.
    std::string piper_voice;
    /// [Piper] A speaker by name (the voice's speaker_id_map) or id;
    /// empty: the voice's default.
    std::string speaker;
    /// [Piper] The prior's noise, 0 or more; unset: the voice's own
    /// (its config's "inference" object, as for the next two).
    std::optional<float> noise_scale;
    /// [built-in, Piper] The speaking pace (larger: slower). Piper streams: above 0, the
    /// voice's own when unset. Built-in voices: Flite's duration stretch,
    /// 0.1 to 10, 1 when unset.
    std::optional<float> length_scale;
    /// [Piper] The durations' noise, 0 or more.
    std::optional<float> noise_w;
    /// [Piper] Seeds the stream's noise generator. The same seed and
    /// text give the same audio, whether pulled live or read offline.
    std::uint64_t seed = 0;
};

/// A set of VoiceKind values, as bits.
using VoiceKinds = std::uint8_t;

/// A pointer to one field of StreamOptions, of any of its types.
using StreamOptionMember =
    std::variant<std::string StreamOptions::*, double StreamOptions::*, bool StreamOptions::*,
                 int StreamOptions::*, std::uint64_t StreamOptions::*,
                 std::optional<float> StreamOptions::*, SchedulingClass StreamOptions::*>;

/// One field of StreamOptions, as the table describes it.
struct StreamOptionField {
    /// Its name: the member's, and the Python keyword argument's.
    const char* name;
    /// The kinds of voice it applies to (VoiceKind bits).
    VoiceKinds kinds;
    /// It names the voice, and so chooses the kind (voice, piper_voice,
    /// model): Python takes it as the `voice` argument, not by name.
    bool names_the_voice;
    /// The member itself; its default is that of a StreamOptions{}.
    StreamOptionMember member;
};

/// Every field of StreamOptions, in the order declared (a test checks that
/// they cover the struct, so a field added without its entry fails it).
std::span<const StreamOptionField> stream_option_fields();
/// The field called `name`. Throws etude::Error for an unknown name, listing
/// the names there are.
const StreamOptionField& stream_option_field(std::string_view name);
/// The kind of voice `options` choose: Piper when piper_voice is set, mel
/// when model is, else built-in.
VoiceKind voice_kind(const StreamOptions& options);
/// "a built-in voice", "a Piper voice" or "a mel stream".
const char* describe(VoiceKind kind);
/// "live", "network" or "offline": the Python package's and etude's names.
const char* to_string(SchedulingClass scheduling);
/// Throws etude::Error naming the first option of `options` that is not at
/// its default and does not apply to their kind of voice, e.g. "seed
/// applies to Piper voices; 'slt' is a built-in voice"; or when both
/// piper_voice and model are set.
void check_options_apply(const StreamOptions& options);

}  // namespace etude::engine
