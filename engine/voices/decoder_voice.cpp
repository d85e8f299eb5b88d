#include "engine/voices/decoder_voice.h"

#include <exception>
#include <utility>

#include "engine/scheduling/block_records.h"
#include "engine/scheduling/deadline.h"
#include "engine/streams/playback_ring.h"
#include "rt/monotonic_clock.h"

namespace etude::engine {

DecoderVoice::DecoderVoice(MelSchedulerOptions options, const PlaybackRing& ring, VoiceSink& sink,
                           BlockRecorder& records)
    : mel_(std::move(options)), ring_(ring), sink_(sink), records_(records) {}

bool DecoderVoice::vocode_frames(std::span<const float> frames, int count, bool last,
                                 const ItemOrigin& origin, DeadlineGate::Turn turn) {
    if (ring_.cancelled(origin.generation)) {
        mel_.reset();
        return false;
    }
    // The same deadline as text blocks (deadline.h).
    MelChunkReport report;
    const auto dispatched = rt::now_ns();
    const PlaybackState playback = ring_.playback_state();
    const auto budget_ns = deadline_ns(dispatched, playback) - dispatched;
    std::span<const float> audio;
    const bool offline = sink_.read_offline();
    mel_.set_batching(offline ? Batching::JoinOffline : Batching::Join, may_wait_to_join(playback));
    mel_.set_read_offline(offline);
    try {
        // A chunk given to the device gives its turn back (mel_scheduler.h).
        audio = mel_.process(frames, count, last, budget_ns, report, may_reduce_quality(playback),
                             [&turn] { turn.release(); });
    } catch (const std::exception&) {
        mel_.reset();  // a device error the CPU could not cover either
        return false;
    }
    turn.release();  // the write may wait for the consumer
    compute_ns_ += report.finished_ns - report.started_ns;
    BlockRecord rec;
    rec.index = records_.next_index();
    rec.processor = to_record(report.processor);
    rec.quality = report.quality;
    rec.reduced_tier = report.quality != Quality::Full;
    rec.fell_back = report.fell_back;
    rec.dispatched_ns = dispatched;
    rec.started_ns = report.started_ns;
    rec.finished_ns = report.finished_ns;
    rec.deadline_ns = dispatched + budget_ns;
    rec.turn_asked_ns = turn.asked_ns();
    rec.turn_granted_ns = turn.granted_ns();
    records_.record(rec);
    if (report.fell_back) records_.note_fallback();
    if (!last && audio.empty()) return true;
    return sink_.write(audio, origin, last);
}

double DecoderVoice::take_compute_seconds() {
    const double s = static_cast<double>(compute_ns_) / 1e9;
    compute_ns_ = 0;
    return s;
}

void DecoderVoice::fill_stats(StreamStats& s) const {
    const auto m = mel_.stats();
    s.model = m.model;
    s.mel_frames = m.frames;
    s.mel_chunks_gpu = m.chunks[0];
    s.mel_chunks_cpu = m.chunks[1];
    s.mel_chunks_phase = m.chunks[2];
    s.model_latency_ms = m.latency_ms;
    s.gpu_device = m.gpu_device;
    s.gpu_note = m.gpu_note;
    s.gpu_failures = m.gpu_failures;
    s.gpu_disabled = m.gpu_disabled;
    s.gpu_ready = m.gpu_ready;
    s.gpu_last_error = m.gpu_last_error;
}

}  // namespace etude::engine
