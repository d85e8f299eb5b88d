#include "engine/models/mel_vocoder_stream.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/error.h"

namespace etude::engine {
namespace {

// Frames per network evaluation at most: bounds device memory for long
// inputs (HiFi-GAN V1 needs about 32 KiB per frame in each work buffer).
constexpr int kMaxFramesPerRun = 512;

}  // namespace

MelVocoderStream::MelVocoderStream(std::shared_ptr<const NeuralModel> model)
    : model_(std::move(model)), n_mels_(model_->audio().n_mels) {}

void MelVocoderStream::release(const NeuralModel& model) {
    if (&model == model_.get()) return;
    std::erase_if(runners_, [&](const auto& r) { return r.first.get() == &model; });
}

long MelVocoderStream::frames_to_run(const NeuralModel& model) const {
    if (inc_active_ && model_.get() == &model) return received_ - inc_fed_;
    return received_ - std::max<long>(0, produced_ - model.left_context());
}

void MelVocoderStream::prepare() {
    if (!incremental_) return;
    if (NetworkStream* r = runner()) r->reset();
}

void MelVocoderStream::gather_mel(long a, long b) {
    // Frame-major history -> channel-major window, as the networks take it.
    const int w = static_cast<int>(b - a);
    window_mel_.resize(static_cast<std::size_t>(w) * n_mels_);
    for (int f = 0; f < w; ++f) {
        const float* src =
            history_.data() + static_cast<std::size_t>(a + f - history_start_) * n_mels_;
        for (int c = 0; c < n_mels_; ++c) window_mel_[static_cast<std::size_t>(c) * w + f] = src[c];
    }
}

void MelVocoderStream::trim_history() {
    // Keep only the left context the next window (or overlap rebuild) needs.
    const long keep_from = std::max<long>(history_start_, history_needed_from());
    if (keep_from > history_start_) {
        history_.erase(
            history_.begin(),
            history_.begin() + static_cast<std::size_t>(keep_from - history_start_) * n_mels_);
        history_start_ = keep_from;
    }
}

void MelVocoderStream::discard_overlap_before(long limit) {
    const long drop = std::min<long>(limit - ola_start_, static_cast<long>(ola_.size()));
    ola_.erase(ola_.begin(), ola_.begin() + drop);
    envelope_.erase(envelope_.begin(), envelope_.begin() + drop);
    ola_start_ = limit;
}

NetworkStream* MelVocoderStream::runner() {
    for (auto& [m, r] : runners_)
        if (m == model_) return r.get();
    runners_.emplace_back(model_, model_->open_stream());
    return runners_.back().second.get();
}

MelVocoderStream::~MelVocoderStream() = default;

ReplayStats MelVocoderStream::replay_stats() const {
    ReplayStats sum;
    for (const auto& [m, r] : runners_) {
        if (!r) continue;
        const ReplayStats s = r->replay_stats();
        sum.recordings += s.recordings;
        sum.replayed += s.replayed;
        sum.op_by_op += s.op_by_op;
    }
    return sum;
}

void MelVocoderStream::reset() {
    history_.clear();
    history_start_ = received_ = produced_ = 0;
    ola_.clear();
    envelope_.clear();
    ola_start_ = emitted_ = 0;
    rebuild_from_ = -1;
    drop_incremental();
}

void MelVocoderStream::drop_incremental() {
    inc_active_ = false;
    pending_.clear();
    // Its runners push no more of this utterance (a new one resets them):
    // their lanes' batches stop waiting for them.
    for (auto& [m, r] : runners_)
        if (r) r->leave_join_lane();
}

std::vector<float> MelVocoderStream::push(std::span<const float> mel, int frames) {
    append(mel, frames);
    return drain(false);
}

std::vector<float> MelVocoderStream::drain(bool final) {
    if (final) return finish();
    return drain_to(ready_frames());
}

long MelVocoderStream::ready_frames() const {
    return std::max<long>(produced_, received_ - model_->right_context());
}

std::vector<float> MelVocoderStream::drain_to(long end_frame) {
    if (end_frame > ready_frames())
        throw Error("drain_to: frame " + std::to_string(end_frame) +
                    " lacks right context (ready up to " + std::to_string(ready_frames()) + ")");
    std::vector<float> out;
    produce(end_frame, false, out);
    return out;
}

void MelVocoderStream::append(std::span<const float> mel, int frames) {
    if (frames < 0 || mel.size() != static_cast<std::size_t>(frames) * n_mels_)
        throw Error("push_mel: got " + std::to_string(mel.size()) + " values for " +
                    std::to_string(frames) + " frames of " + std::to_string(n_mels_) + " mels");
    for (float v : mel)
        if (std::isnan(v)) throw Error("push_mel: the mel chunk holds NaN");
    // Channel-major chunk -> frame-major history.
    const std::size_t old = history_.size();
    history_.resize(old + mel.size());
    for (int f = 0; f < frames; ++f)
        for (int c = 0; c < n_mels_; ++c)
            history_[old + static_cast<std::size_t>(f) * n_mels_ + c] =
                mel[static_cast<std::size_t>(c) * frames + f];
    received_ += frames;
}

std::vector<float> MelVocoderStream::finish() {
    std::vector<float> out;
    produce(received_, true, out);
    if (model_->audio().architecture == "vocos" && received_ == 0) out.clear();
    reset();
    return out;
}

void MelVocoderStream::set_model(std::shared_ptr<const NeuralModel> model) {
    const auto& a = model->audio();
    const auto& b = model_->audio();
    if (a.architecture != b.architecture || a.n_mels != b.n_mels || a.hop != b.hop ||
        a.n_fft != b.n_fft || model->left_context() != model_->left_context() ||
        model->right_context() != model_->right_context())
        throw Error("set_model: " + model->label() + " is not the same model as " +
                    model_->label());
    if (model.get() == model_.get()) return;
    // The runner's state lives on the old model's backend: the next chunk
    // primes the new model's runner from the kept context.
    drop_incremental();
    model_ = std::move(model);
}

std::size_t MelVocoderStream::skip_to(long end) {
    end = std::min<long>(end, received_);
    if (end <= produced_) return 0;
    const long before = emitted_;
    const auto& audio = model_->audio();
    drop_incremental();  // its state has not seen the frames skipped
    const long added = rebuild_from_ >= 0 ? rebuild_from_ : produced_;
    produced_ = end;
    if (audio.architecture == "hifigan") {
        emitted_ = produced_ * audio.hop;
    } else {
        // Positions up to produced_ * hop get no frames from the network.
        const long limit = produced_ * audio.hop;
        const long half = audio.n_fft / 2;
        if (limit - half > emitted_) {
            emitted_ = limit - half;
            discard_overlap_before(limit);
        }
        // The skipped frames' windows reach into what the network makes
        // next: it reruns them first (their context is kept for that). Frames
        // before `added` are in the overlap-add already (a skip shorter than
        // a window) and must not be added twice.
        rebuild_from_ = std::max({0L, produced_ - overlap_frames(), added});
    }
    trim_history();
    return static_cast<std::size_t>(emitted_ - before);
}

void MelVocoderStream::produce(long end_frame, bool final, std::vector<float>& out) {
    // A failed run (a device error) leaves the stream as it was, so that the
    // caller can redo the same frames on another backend.
    struct Saved {
        long produced, emitted, ola_start, rebuild_from;
        std::size_t out_size;
        std::vector<float> ola, envelope;
    } saved{produced_, emitted_, ola_start_, rebuild_from_, out.size(), ola_, envelope_};
    try {
        produce_pieces(end_frame, final, out);
    } catch (...) {
        produced_ = saved.produced;
        emitted_ = saved.emitted;
        ola_start_ = saved.ola_start;
        rebuild_from_ = saved.rebuild_from;
        drop_incremental();  // a failed runner's state is unknown: prime a new one
        ola_ = std::move(saved.ola);
        envelope_ = std::move(saved.envelope);
        out.resize(saved.out_size);
        throw;
    }
    if (final && produced_ == end_frame) assemble(nullptr, 0, true, out);
    trim_history();
}

void MelVocoderStream::produce_pieces(long end_frame, bool final, std::vector<float>& out) {
    if (rebuild_from_ >= 0 && (produced_ < end_frame || final)) rebuild_overlap();
    if (use_incremental(final)) {
        produce_incremental(end_frame, final, out);
        return;
    }
    while (produced_ < end_frame) {
        const long a = produced_;
        const long b = std::min<long>(end_frame, a + kMaxFramesPerRun);
        run_window(a, b);
        produced_ = b;
        assemble(values_.data(), static_cast<int>(b - a), final && b == end_frame, out);
    }
}

void MelVocoderStream::run_window(long a, long b) {
    const int left = model_->left_context(), right = model_->right_context();
    const long ws = std::max<long>(0, a - left);
    const long we = std::min<long>(received_, b + right);
    const int w = static_cast<int>(we - ws);
    gather_mel(ws, we);
    values_.resize(static_cast<std::size_t>(b - a) * model_->values_per_frame());
    model_->run(window_mel_.data(), w, static_cast<int>(a - ws), static_cast<int>(b - a),
                values_.data());
    frames_run_ += static_cast<std::uint64_t>(w);
}

bool MelVocoderStream::use_incremental(bool final) {
    if (!incremental_) return false;
    // All of an utterance at once (NeuralModel::vocode): one window is cheaper.
    if (!inc_active_ && final && produced_ == 0) return false;
    return runner() != nullptr;
}

void MelVocoderStream::produce_incremental(long end_frame, bool final, std::vector<float>& out) {
    const int per = model_->values_per_frame();
    if (!inc_active_) {
        // Prime a runner from the left context: its first outputs only see
        // zeros before `start`, so they are discarded up to produced_, whose
        // receptive field lies inside the history.
        const long start = std::max<long>(0, produced_ - model_->left_context());
        runner()->reset();
        pending_.clear();
        inc_fed_ = pending_first_ = start;
        inc_active_ = true;
    }
    for (;;) {
        const long a = inc_fed_, b = std::min<long>(received_, a + kMaxFramesPerRun);
        const bool flush = final && b == received_;
        if (b == a && !flush) break;
        const int w = static_cast<int>(b - a);
        gather_mel(a, b);
        runner()->set_join_wait_until(join_wait_until_ns_);
        runner()->push(window_mel_.data(), w, flush, pending_, batching_);
        frames_run_ += static_cast<std::uint64_t>(w);
        inc_fed_ = b;
        if (flush) break;
    }
    // Values of frames before produced_ (priming) are not needed.
    const std::size_t stale =
        std::min(pending_.size(), static_cast<std::size_t>(produced_ - pending_first_) * per);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(stale));
    pending_first_ = produced_;
    end_frame = std::max(end_frame, produced_);  // nothing asked that is not made
    const long count = end_frame - produced_;
    if (pending_.size() < static_cast<std::size_t>(count) * per)
        throw Error("vocoder stream: the incremental run is behind the right context (frame " +
                    std::to_string(end_frame) + " asked, " +
                    std::to_string(pending_first_ + static_cast<long>(pending_.size()) / per) +
                    " ready)");
    produced_ = end_frame;
    assemble(pending_.data(), static_cast<int>(count), final, out);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count) * per);
    pending_first_ = end_frame;
    if (final) drop_incremental();
}

int MelVocoderStream::overlap_frames() const {
    const auto& audio = model_->audio();
    if (audio.architecture != "vocos") return 0;
    return (audio.n_fft + audio.hop - 1) / audio.hop - 1;
}

long MelVocoderStream::history_needed_from() const {
    return (rebuild_from_ >= 0 ? rebuild_from_ : produced_) - model_->left_context();
}

void MelVocoderStream::rebuild_overlap() {
    const long a = rebuild_from_, b = produced_;
    if (b > a) {
        run_window(a, b);
        overlap_add(values_.data(), a, static_cast<int>(b - a));
    }
    rebuild_from_ = -1;
}

void MelVocoderStream::overlap_add(const float* values, long first, int count) {
    const auto& audio = model_->audio();
    const int n = audio.n_fft, hop = audio.hop;
    const auto& win = model_->synthesis_window();
    const long end = (first + count - 1) * hop + n;  // OLA extent after these frames
    if (end > ola_start_ + static_cast<long>(ola_.size())) {
        ola_.resize(static_cast<std::size_t>(end - ola_start_), 0.0f);
        envelope_.resize(ola_.size(), 0.0f);
    }
    for (int i = 0; i < count; ++i) {
        const long start = (first + i) * hop - ola_start_;
        const float* v = values + static_cast<std::size_t>(i) * n;
        // Positions before ola_start_ were emitted already (after a skip).
        for (long k = std::max<long>(0, -start); k < n; ++k) {
            ola_[start + k] += v[k] * win[k];
            envelope_[start + k] += win[k] * win[k];
        }
    }
}

void MelVocoderStream::assemble(const float* values, int count, bool final,
                                std::vector<float>& out) {
    const auto& audio = model_->audio();
    if (audio.architecture == "hifigan") {
        if (values) {
            out.insert(out.end(), values, values + static_cast<std::size_t>(count) * audio.hop);
            emitted_ += static_cast<long>(count) * audio.hop;
        }
        return;
    }
    // Vocos: inverse STFT with center=True, as torch.istft: windowed
    // overlap-add divided by the summed squared window, first n_fft/2 samples
    // dropped, hop * (frames - 1) samples in all.
    const int n = audio.n_fft, hop = audio.hop, half = n / 2;
    if (values) overlap_add(values, produced_ - count, count);
    // Samples t' (centred time) below produced_ * hop get no more frames.
    long limit = final ? half + (received_ > 0 ? (received_ - 1) * hop : 0) : produced_ * hop;
    const long begin = emitted_ + half;
    if (limit > ola_start_ + static_cast<long>(ola_.size())) {
        ola_.resize(static_cast<std::size_t>(limit - ola_start_), 0.0f);
        envelope_.resize(ola_.size(), 0.0f);
    }
    for (long t = begin; t < limit; ++t) {
        const float e = envelope_[t - ola_start_];
        out.push_back(e > 1e-11f ? ola_[t - ola_start_] / e : 0.0f);
    }
    if (limit > begin) {
        emitted_ += limit - begin;
        discard_overlap_before(limit);
    }
}

}  // namespace etude::engine
