#include "engine/engine.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/block_plan.h"
#include "engine/block_processor.h"
#include "engine/flite_voice.h"
#include "engine/latency_estimator.h"
#include "engine/mel_scheduler.h"
#include "engine/text_input.h"
#include "engine/utterance_renderer.h"
#include "gpu/registry.h"
#include "rt/counters.h"
#include "rt/monotonic_clock.h"
#include "rt/spsc_ring.h"

namespace etude::engine {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kMinRate = 8000.0, kMaxRate = 192000.0;
// Sentences analysed ahead of the one being spoken: enough to keep the
// vocoder and the render workers fed, few enough that a long text costs
// memory for only a few.
constexpr std::size_t kLookaheadSentences = 3;
// How often a producer blocked on a full ring rechecks it: a real-time
// reader never signals (it must not), so the writer polls.
constexpr auto kSpacePoll = std::chrono::milliseconds(1);
// Block records kept for stats and traces (a ring; the oldest are dropped).
constexpr std::size_t kRecordCapacity = 1 << 16;
// The least time the block scheduler plans for a block beyond its measured
// cost: the hand-over to a processor thread and back (wake-ups).
constexpr std::int64_t kWakeAllowanceNs = 1'000'000;
struct Choice {
    int processor;  // 0: the stream's primary, 1: the fallback, 2: the GPU
    dsp::MlsaTier tier;
};
constexpr int kMaxChoices = 4;
constexpr Choice kChoices[] = {{0, dsp::MlsaTier::Full},
                               {1, dsp::MlsaTier::Full},
                               {0, dsp::MlsaTier::Reduced},
                               {1, dsp::MlsaTier::Reduced}};
// The time budget of mel chunks for an offline (read()-only) consumer.
constexpr std::int64_t kNoDeadlineNs = std::int64_t{1} << 60;
// Fade applied around an underrun's gap, in ms.
constexpr double kUnderrunFadeMs = 2.0;

struct Sentence {
    std::string text;
    const FliteVoice* voice;
    std::uint64_t generation;
    Clock::time_point pushed;
    bool first_of_push;
};

// An analysed sentence. Its audio is made either block by block by the
// stream's scheduler (the sentence being spoken), or ahead of time into
// `audio` by an engine render worker (the sentences after it).
struct Utterance {
    enum State { Pending, Scheduled, WorkerRendering, Rendered, Abandoned };
    AcousticFrames frames;
    const FliteVoice* voice = nullptr;
    std::uint64_t generation = 0;
    Clock::time_point pushed;
    bool first_of_push = false;
    State state = Pending;     // guarded by the stream's mutex
    std::vector<float> audio;  // valid once state == Rendered
    // A chunk of a mel stream instead of an analysed sentence.
    bool is_mel = false;
    std::vector<float> mel;  // [n_mels][mel_frames]
    std::size_t mel_frames = 0;
    bool mel_last = false;
    bool mel_first = false;  // the first chunk of a mel utterance
    std::int64_t render_started_ns = 0, render_finished_ns = 0;
};

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

FaultPlan fault_from_environment(FaultPlan plan) {
    // ETUDE_FAULT_SLOW=PROBABILITY:MILLISECONDS slows the primary processor.
    if (const char* env = std::getenv("ETUDE_FAULT_SLOW")) {
        double p = 0, ms = 0;
        if (std::sscanf(env, "%lf:%lf", &p, &ms) == 2 && p > 0 && ms > 0) {
            plan.slow_probability = p;
            plan.slow_ms = ms;
        }
    }
    return plan;
}

}  // namespace

class EngineCore {
  public:
    EngineCore() {
        front_end_ = std::thread([this] { run_front_end(); });
        // Render workers pre-vocode upcoming sentences on the other cores.
        const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
        for (unsigned i = 0; i + 1 < std::min(cores, 9u); ++i)
            renderers_.emplace_back([this] { run_renderer(); });
    }
    ~EngineCore() { stop(); }

    void add(const std::shared_ptr<StreamCore>& s) {
        std::lock_guard lock(mu_);
        streams_.push_back(s);
    }
    void wake() { cv_.notify_all(); }

    // The GPU processor of a device, created on first use and shared by the
    // streams using that device while any of them lives.
    template <typename Make>
    std::shared_ptr<BlockProcessor> shared_gpu_processor(const std::string& device, Make make) {
        std::lock_guard lock(gpu_mu_);
        auto& weak = gpu_processors_[device];
        if (auto p = weak.lock()) return p;
        auto p = make();
        weak = p;
        return p;
    }
    void stop() {
        {
            std::lock_guard lock(mu_);
            if (stopping_) return;
            stopping_ = true;
        }
        cv_.notify_all();
        if (front_end_.joinable()) front_end_.join();
        for (auto& t : renderers_)
            if (t.joinable()) t.join();
    }
    bool stopping() {
        std::lock_guard lock(mu_);
        return stopping_;
    }

  private:
    // Finds work with `take` over the streams, round-robin; waits if none.
    template <typename Job, typename Take>
    std::pair<std::shared_ptr<StreamCore>, Job> next_job(Take take);
    void run_front_end();
    void run_renderer();

    std::mutex mu_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::list<std::weak_ptr<StreamCore>> streams_;
    std::size_t round_robin_ = 0;
    std::thread front_end_;
    std::vector<std::thread> renderers_;
    std::mutex gpu_mu_;
    std::map<std::string, std::weak_ptr<BlockProcessor>> gpu_processors_;
};

class StreamCore {
  public:
    StreamCore(std::shared_ptr<EngineCore> engine, const FliteVoice& voice, StreamOptions options)
        : engine_(std::move(engine)),
          voice_(&voice),
          options_(std::move(options)),
          rate_(options_.sample_rate),
          latency_samples_(static_cast<std::size_t>(rate_ * options_.latency_ms / 1000.0)),
          ring_(latency_samples_ + static_cast<std::size_t>(rate_ * 0.25) + 16384),
          fade_len_(std::max<std::size_t>(
              1, static_cast<std::size_t>(rate_ * options_.cancel_fade_ms / 1000.0))),
          underrun_fade_len_(
              std::max<std::size_t>(1, static_cast<std::size_t>(rate_ * kUnderrunFadeMs / 1000.0))),
          frames_per_block_(std::max<std::size_t>(
              1, static_cast<std::size_t>(std::lround(options_.block_ms / 5.0)))),
          primary_("cpu-primary", options_.realtime_workers,
                   fault_from_environment(options_.primary_fault)),
          fallback_("cpu-fallback", options_.realtime_workers, options_.fallback_fault),
          spectral_(options_.vocoder == "spectral"),
          records_(kRecordCapacity) {
        if (spectral_) open_gpu();
        if (!options_.model.empty()) {
            MelSchedulerOptions m;
            m.model_path = options_.model;
            m.cpu_model_path = options_.cpu_model;
            m.backend = options_.backend;
            m.device = options_.device;
            m.output_rate = rate_;
            m.gpu_fault = options_.gpu_fault;
            m.allow_phase_fallback = options_.allow_phase_fallback;
            mel_ = std::make_unique<MelScheduler>(m);
        }
        // Estimators per (processor, tier): Full and Reduced on each. The
        // margin is at least kWakeAllowanceNs: a block costs ~0.1 ms, so with
        // the estimator's default 0.2 ms floor a fallback sent at its cut-off
        // had 0.0-0.1 ms of slack left, and on a VM a thread's wake-up
        // sometimes takes longer than that (late blocks in half the runs of
        // BlockScheduler.slow_primary_..., now and then an underrun).
        for (auto& e : estimators_) e = LatencyEstimator(0.95, 0.25, kWakeAllowanceNs);
        fade_in_ = underrun_fade_len_;  // no fade-in until an underrun has happened
        prepare_voice(voice);
    }

    void start() {
        producer_ = std::thread([this] { produce(); });
        if (spectral_ && options_.wait_for_device) {
            const auto until = Clock::now() + std::chrono::seconds(60);
            auto ready = [&](const BlockProcessor& p) { return p.healthy() || p.disabled(); };
            while (Clock::now() < until && !(ready(primary_) && (!gpu_ || ready(*gpu_))))
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }

    ~StreamCore() {
        {
            std::lock_guard lock(mu_);
            shutdown_ = true;
        }
        work_cv_.notify_all();
        space_cv_.notify_all();
        done_cv_.notify_all();
        if (producer_.joinable()) producer_.join();
        // Jobs may still sit on a processor; wait until they are off it.
        for (auto& j : jobs_)
            while (j && j->in_use.load(std::memory_order_acquire))
                std::this_thread::sleep_for(std::chrono::microseconds(100));
    }

    // ---- any thread -------------------------------------------------------
    std::size_t mel_bands() const {
        return mel_ ? static_cast<std::size_t>(mel_->audio().n_mels) : 0;
    }

    void push_mel(std::span<const float> mel, std::size_t frames, bool last) {
        if (!mel_)
            throw Error("push_mel needs a mel stream: create it with StreamOptions::model set");
        const std::size_t n_mels = static_cast<std::size_t>(mel_->audio().n_mels);
        if (mel.size() != frames * n_mels)
            throw Error("push_mel: " + std::to_string(mel.size()) + " values is not " +
                        std::to_string(n_mels) + " mels x " + std::to_string(frames) + " frames");
        for (float v : mel)
            if (!std::isfinite(v))
                throw Error("push_mel: the chunk holds a value that is not finite");
        if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
        if (frames == 0 && !last) return;
        auto u = std::make_shared<Utterance>();
        u->is_mel = true;
        u->mel.assign(mel.begin(), mel.end());
        u->mel_frames = frames;
        u->mel_last = last;
        u->pushed = Clock::now();
        {
            std::lock_guard lock(mu_);
            u->generation = generation_.load(std::memory_order_relaxed);
            u->first_of_push = outstanding_ == 0;
            u->mel_first = !mel_open_;
            mel_open_ = !last;
            u->voice = voice_;
            params_queue_.push_back(std::move(u));
            ++outstanding_;
            ++sentences_queued_;
        }
        work_cv_.notify_all();
    }

    std::size_t push_text(std::string_view text) {
        if (mel_)
            throw Error("this stream vocodes mel frames (StreamOptions::model); use push_mel");
        if (auto bad = find_invalid_utf8(text))
            throw Error("text is not valid UTF-8 (bad byte at offset " + std::to_string(*bad) +
                        ")");
        if (engine_->stopping()) throw Error("the engine of this stream has been destroyed");
        auto pieces = split_sentences(text);
        if (pieces.empty()) return 0;
        const auto now = Clock::now();
        {
            std::lock_guard lock(mu_);
            const auto gen = generation_.load(std::memory_order_relaxed);
            // First-audio latency is measured from a push into an idle stream.
            bool first = outstanding_ == 0;
            for (auto& p : pieces) {
                text_queue_.push_back({std::move(p), next_voice_, gen, now, first});
                first = false;
            }
            outstanding_ += pieces.size();
            sentences_queued_ += pieces.size();
        }
        engine_->wake();
        return pieces.size();
    }

    void set_voice(std::string_view name) {
        const FliteVoice& v = FliteVoice::load(name);
        std::lock_guard lock(mu_);
        next_voice_ = &v;
    }

    void cancel() {
        std::size_t dropped;
        {
            std::lock_guard lock(mu_);
            dropped = text_queue_.size() + params_queue_.size();
            outstanding_ -= dropped;
            text_queue_.clear();
            params_queue_.clear();
            mel_open_ = false;  // the next push_mel starts a new utterance
            generation_.fetch_add(1, std::memory_order_release);
            ++cancels_;
        }
        sentences_dropped_.add(dropped);
        work_cv_.notify_all();
        space_cv_.notify_all();
        done_cv_.notify_all();
    }

    bool busy() const {
        std::lock_guard lock(mu_);
        // An open mel utterance (its `last` chunk not yet pushed) is unfinished work.
        return outstanding_ > 0 || mel_open_ || ring_.read_available() > 0;
    }

    // The latency in force: the budget, or twice the consumer's period if
    // that is larger (a consumer cannot be served with less than it takes).
    std::size_t effective_latency_samples() const {
        const auto pull = static_cast<std::size_t>(std::max<std::int64_t>(max_pull_.get(), 0));
        return std::max(latency_samples_, 2 * pull);
    }
    double latency_ms() const {
        return static_cast<double>(effective_latency_samples()) * 1000.0 / rate_;
    }

    StreamStats stats() const {
        StreamStats s;
        s.samples_delivered = delivered_.get();
        s.underruns = underruns_.get();
        s.underrun_samples = underrun_samples_.get();
        s.sentences_spoken = sentences_spoken_.get();
        s.sentences_dropped = sentences_dropped_.get();
        s.frames_vocoded = frames_vocoded_.get();
        s.latency_ms = latency_ms();
        s.realtime_workers = primary_.realtime() && fallback_.realtime();
        s.vocoder = mel_ ? "neural" : spectral_ ? "spectral" : "mlsa";
        if (mel_) {
            const auto m = mel_->stats();
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
            s.gpu_last_error = m.gpu_last_error;
        }
        if (gpu_) {
            s.gpu_device = gpu_name_;
            s.gpu_failures = static_cast<std::uint64_t>(gpu_->failures());
            s.gpu_disabled = gpu_->disabled();
            s.gpu_last_error = gpu_->last_error();
            s.gpu_batches = gpu_->batches();
            s.gpu_batched_jobs = gpu_->batched_jobs();
            s.gpu_largest_batch = gpu_->largest_batch();
        } else if (!mel_) {
            s.gpu_note = gpu_note_;
        }
        std::lock_guard lock(mu_);
        s.sentences_queued = sentences_queued_;
        s.cancels = cancels_;
        s.sentences_unspeakable = sentences_unspeakable_;
        s.first_audio_ms = first_audio_ms_;
        s.frontend_seconds = frontend_seconds_;
        s.vocoder_seconds = vocoder_seconds_;
        s.blocks = block_counts_[0] + block_counts_[1] + block_counts_[2] + block_counts_[3];
        s.blocks_gpu = block_counts_[BlockRecord::Gpu];
        s.blocks_primary = block_counts_[BlockRecord::Primary];
        s.blocks_fallback = block_counts_[BlockRecord::Fallback];
        s.blocks_ahead = block_counts_[BlockRecord::Ahead];
        s.fallbacks = fallbacks_;
        s.late_blocks = late_blocks_;
        s.reduced_tier_blocks = reduced_blocks_;
        return s;
    }

    // Per-kernel device timings of the backends this stream's blocks used
    // (spectral streams; MLSA blocks run no kernels).
    std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> kernel_timings() const {
        std::vector<std::pair<std::string, std::vector<gpu::KernelTiming>>> out;
        if (!spectral_) return out;
        if (gpu_ && gpu_->backend())
            out.emplace_back(gpu_->name(), gpu_->backend()->kernel_timings());
        out.emplace_back("cpu", gpu::shared_cpu_backend()->kernel_timings());
        return out;
    }

    std::vector<BlockRecord> block_records(std::size_t max) const {
        std::lock_guard lock(mu_);
        const std::size_t n = std::min({max, records_written_, kRecordCapacity});
        std::vector<BlockRecord> out;
        out.reserve(n);
        for (std::size_t i = records_written_ - n; i < records_written_; ++i)
            out.push_back(records_[i % kRecordCapacity]);
        return out;
    }

    // ---- real-time consumer -----------------------------------------------
    std::size_t pull(std::span<float> out) noexcept {
        max_pull_.store_max(static_cast<std::int64_t>(out.size()));
        if (!live_consumer_.load(std::memory_order_relaxed))
            live_consumer_.store(true, std::memory_order_relaxed);
        const auto target = generation_.load(std::memory_order_acquire);
        if (target != consumer_generation_) return pull_cancelled(out, target);

        // Keep the timeline fixed: samples the consumer already played as
        // silence during an underrun are skipped when they arrive late.
        if (owed_ > 0) {
            const std::size_t skipped = ring_.discard(owed_);
            owed_ -= skipped;
            if (skipped > 0) fade_in_ = 0;
        }

        const std::size_t available = ring_.read_available();
        const auto end = end_of_speech_.load(std::memory_order_acquire);
        if (!in_speech_.load(std::memory_order_relaxed)) {
            // Start only once the fixed latency's worth of audio is ready
            // (or all of a short utterance is), so the latency never drifts.
            const std::size_t prebuffer = effective_latency_samples();
            const bool whole =
                end > ring_.read_position() && end <= ring_.read_position() + available;
            if (available == 0 || (available < prebuffer && !whole)) {
                std::fill(out.begin(), out.end(), 0.0f);
                return 0;
            }
        }

        const std::size_t n = ring_.read(out);
        std::fill(out.begin() + static_cast<long>(n), out.end(), 0.0f);
        if (n > 0) {
            in_speech_.store(true, std::memory_order_relaxed);
            if (fade_in_ < underrun_fade_len_) {
                for (std::size_t i = 0; i < n && fade_in_ < underrun_fade_len_; ++i, ++fade_in_)
                    out[i] *= static_cast<float>(fade_in_) / static_cast<float>(underrun_fade_len_);
            }
        }
        if (n < out.size() && in_speech_.load(std::memory_order_relaxed)) {
            if (ring_.read_position() == end_of_speech_.load(std::memory_order_acquire)) {
                in_speech_.store(false, std::memory_order_relaxed);  // everything queued was played
                owed_ = 0;
            } else {
                // Nothing ready in time: fade out what there is, count it,
                // and remember how much of the timeline was played as silence.
                const std::size_t f = std::min(n, underrun_fade_len_);
                for (std::size_t i = 0; i < f; ++i)
                    out[n - f + i] *= 1.0f - static_cast<float>(i + 1) / static_cast<float>(f);
                underruns_.add();
                underrun_samples_.add(out.size() - n);
                owed_ += out.size() - n;
                fade_in_ = 0;
            }
        }
        delivered_.add(n);
        return n;
    }

    // ---- offline consumer -------------------------------------------------
    std::size_t read(std::span<float> out) {
        std::size_t got = 0;
        while (got < out.size()) {
            const auto target = generation_.load(std::memory_order_acquire);
            if (target != consumer_generation_) {
                got += pull_cancelled(out.subspan(got), target);
                continue;
            }
            const std::size_t n = ring_.read(out.subspan(got));
            got += n;
            delivered_.add(n);
            if (n > 0) {
                space_cv_.notify_one();
                continue;
            }
            std::unique_lock lock(mu_);
            data_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] {
                return ring_.read_available() > 0 || (outstanding_ == 0 && !mel_open_) || shutdown_;
            });
            if (ring_.read_available() == 0 && ((outstanding_ == 0 && !mel_open_) || shutdown_))
                break;
        }
        return got;
    }

    // ---- front-end worker -------------------------------------------------
    // Takes the next sentence to analyse if this stream has room for more
    // look-ahead. Called with the engine's lock held, never this stream's.
    std::optional<Sentence> take_sentence() {
        std::lock_guard lock(mu_);
        if (shutdown_ || text_queue_.empty() || analysing_ ||
            params_queue_.size() >= kLookaheadSentences)
            return std::nullopt;
        Sentence s = std::move(text_queue_.front());
        text_queue_.pop_front();
        analysing_ = true;
        return s;
    }

    void analyse(Sentence sentence) {
        const auto t0 = Clock::now();
        AcousticFrames frames;
        try {
            frames = sentence.voice->analyse(sentence.text);
        } catch (const Error&) {
            frames = AcousticFrames{};  // counted as dropped below
        }
        {
            std::lock_guard lock(mu_);
            analysing_ = false;
            frontend_seconds_ += seconds_since(t0);
            if (sentence.generation == generation_.load(std::memory_order_relaxed) &&
                frames.frames > 1) {
                auto u = std::make_shared<Utterance>();
                u->frames = std::move(frames);
                u->voice = sentence.voice;
                u->generation = sentence.generation;
                u->pushed = sentence.pushed;
                u->first_of_push = sentence.first_of_push;
                params_queue_.push_back(std::move(u));
            } else {
                // Nothing to say (only symbols Flite skips, or a front-end
                // error), or cancelled while being analysed: cancel() counts
                // only the queued sentences, so this one is settled here.
                --outstanding_;
                sentences_dropped_.add();
                if (sentence.generation == generation_.load(std::memory_order_relaxed))
                    ++sentences_unspeakable_;
            }
        }
        work_cv_.notify_all();
        data_cv_.notify_all();
        engine_->wake();  // a render worker may take it
    }

    // ---- render workers ---------------------------------------------------
    // Claims an analysed sentence that is not about to be scheduled by this
    // stream's own producer (that one goes block by block, for the lowest
    // latency). Called with the engine's lock held.
    std::shared_ptr<Utterance> take_render_job() {
        std::lock_guard lock(mu_);
        // Spectral streams give every block to the scheduler (and the GPU).
        if (shutdown_ || !options_.render_ahead || spectral_) return nullptr;
        // While the producer is idle it will take the head itself.
        for (std::size_t i = producer_busy_ ? 0 : 1; i < params_queue_.size(); ++i) {
            auto& u = params_queue_[i];
            if (u->state == Utterance::Pending) {
                u->state = Utterance::WorkerRendering;
                return u;
            }
        }
        return nullptr;
    }

    void render_ahead(const std::shared_ptr<Utterance>& u) {
        const auto t0 = Clock::now();
        const auto start_ns = rt::now_ns();
        UtteranceRenderer renderer(*u->voice, rate_);
        std::vector<float> audio;
        audio.reserve(static_cast<std::size_t>(static_cast<double>(u->frames.frames) *
                                               u->voice->vocoder_config().frame_period * rate_ /
                                               u->voice->sample_rate()) +
                      1024);
        const bool done = renderer.render(u->frames, [&](std::span<const float> chunk, bool) {
            audio.insert(audio.end(), chunk.begin(), chunk.end());
            return !cancelled(u->generation);
        });
        {
            std::lock_guard lock(mu_);
            u->audio = std::move(audio);
            u->render_started_ns = start_ns;
            u->render_finished_ns = rt::now_ns();
            u->state = done ? Utterance::Rendered : Utterance::Abandoned;
            vocoder_seconds_ += seconds_since(t0);
        }
        if (done) frames_vocoded_.add(u->frames.frames);
        work_cv_.notify_all();
    }

    const FliteVoice& voice() const { return *voice_; }
    const StreamOptions& options() const { return options_; }

  private:
    std::size_t pull_cancelled(std::span<float> out, std::uint64_t target) noexcept {
        std::size_t n = 0;
        if (!cancel_faded_) {
            // Fade what is left of the current speech over one short ramp.
            n = ring_.read(out.first(std::min(out.size(), fade_len_)));
            for (std::size_t i = 0; i < n; ++i)
                out[i] *= 1.0f - static_cast<float>(i + 1) / static_cast<float>(fade_len_);
            cancel_faded_ = true;
        }
        std::fill(out.begin() + static_cast<long>(n), out.end(), 0.0f);
        delivered_.add(n);
        in_speech_.store(false, std::memory_order_relaxed);
        owed_ = 0;
        // Drop cancelled audio. Once the producer has acknowledged the cancel,
        // everything it wrote before its acknowledgement is old; after, new.
        if (producer_generation_.load(std::memory_order_acquire) == target) {
            const auto ack = ack_position_.load(std::memory_order_relaxed);
            const auto pos = ring_.read_position();
            if (ack > pos) ring_.discard(static_cast<std::size_t>(ack - pos));
            consumer_generation_ = target;
            cancel_faded_ = false;
        } else {
            ring_.discard(ring_.read_available());
        }
        return n;
    }

    // ---- producer thread: the block scheduler ------------------------------
    void produce() {
        std::uint64_t seen_generation = generation_.load(std::memory_order_acquire);
        for (;;) {
            std::unique_lock lock(mu_);
            producer_busy_ = false;
            work_cv_.wait(lock, [&] {
                return shutdown_ || !params_queue_.empty() ||
                       generation_.load(std::memory_order_relaxed) != seen_generation;
            });
            if (shutdown_) return;
            const auto gen = generation_.load(std::memory_order_relaxed);
            if (gen != seen_generation) {
                seen_generation = gen;
                if (mel_) mel_->reset();
                acknowledge(gen);
                continue;
            }
            std::shared_ptr<Utterance> u = std::move(params_queue_.front());
            params_queue_.pop_front();
            producer_busy_ = true;
            if (u->is_mel) {
                lock.unlock();
                first_audio_pending_ = first_audio_pending_ || u->first_of_push;
                compute_ns_ = 0;
                const bool complete = vocode_mel(*u);
                finish_utterance(complete, static_cast<double>(compute_ns_) / 1e9);
                continue;
            }
            const bool mine = u->state == Utterance::Pending;
            if (mine) u->state = Utterance::Scheduled;
            if (!mine) {
                // A render worker has it: wait for its audio (or the cancel).
                work_cv_.wait(lock, [&] {
                    return shutdown_ || u->state == Utterance::Rendered ||
                           u->state == Utterance::Abandoned || cancelled(u->generation);
                });
                if (shutdown_) return;
            }
            lock.unlock();
            engine_->wake();  // room for more look-ahead
            first_audio_pending_ = true;
            compute_ns_ = 0;
            const bool complete = mine ? schedule_blocks(*u) : copy_into_ring(*u);
            finish_utterance(complete, static_cast<double>(compute_ns_) / 1e9);
        }
    }

    // The spectral vocoder may run on a GPU: open the requested (or best)
    // device; if it is the CPU, or cannot be opened, the CPU processors do
    // the work and the reason is kept for the statistics.
    void open_gpu() {
        try {
            auto& registry = gpu::DeviceRegistry::instance();
            const auto request = gpu::with_environment(
                gpu::parse_backend_request(options_.backend, options_.device));
            const gpu::DeviceInfo d = registry.resolve(request);
            if (d.kind == gpu::BackendKind::Cpu) {
                gpu_note_ = "the spectral vocoder runs on the CPU backend";
                return;
            }
            auto backend = registry.open(request);
            if (options_.gpu_fault.kind != gpu::GpuFault::None)
                backend->inject_fault(options_.gpu_fault);
            gpu_forced_ = request.kind != "auto";
            // One processor per device, shared by every stream on it, so the
            // device gets one batch of launches for all of them.
            gpu_ = engine_->shared_gpu_processor(
                std::string(gpu::to_string(d.kind)) + ":" + std::to_string(d.index), [&] {
                    return std::make_shared<BlockProcessor>(
                        std::string("gpu-") + gpu::to_string(d.kind), false, options_.primary_fault,
                        backend);
                });
            gpu_name_ = d.name;
        } catch (const std::exception& e) {
            gpu_note_ = std::string("no GPU processor: ") + e.what();
        }
    }

    void prepare_voice(const FliteVoice& v) {
        if (prepared_voice_ == &v) return;
        prepared_voice_ = &v;
        const auto& cfg = v.vocoder_config();
        for (auto& j : jobs_) {
            // Old jobs may still be on a processor (abandoned after a cut-off).
            if (j)
                while (j->in_use.load(std::memory_order_acquire))
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
            j = std::make_unique<BlockJob>(cfg);
            j->samples.resize(frames_per_block_ * cfg.frame_period);
            j->done_mutex = &done_mu_;
            j->done_cv = &done_cv_;
        }
        abandoned_.clear();  // their jobs were replaced above
        state_.emplace(cfg);
        spectral_state_.emplace(spectral_config(cfg));
        if (spectral_) {
            primary_.prepare_spectral(spectral_config(cfg));
            if (gpu_) gpu_->prepare_spectral(spectral_config(cfg));
        }
        resampler_.reset();
        if (rate_ != v.sample_rate()) {
            resampler_.emplace(v.sample_rate(), rate_);
            resampled_.resize(resampler_->max_output_for(frames_per_block_ * cfg.frame_period));
        }
    }

    // Deadline of the next block: when the consumer will need its first
    // sample, given what is already buffered ahead of it. Before playback
    // starts the consumer waits for the fixed latency's worth of audio, so a
    // block is needed no sooner than that; once it plays, what the ring
    // holds is all the time there is. (Taking the latency then as well gave
    // every block the same deadline, however little was buffered: right
    // after a fallback that only just made it the ring holds one block, and
    // the next slow block was cut off too late to be covered.)
    std::int64_t next_deadline_ns(std::int64_t now) const {
        const std::size_t fill = ring_.read_available();
        const auto guard = static_cast<std::size_t>(std::max<std::int64_t>(max_pull_.get(), 0));
        const bool playing = in_speech_.load(std::memory_order_relaxed);
        const std::size_t ahead = playing ? fill : std::max(fill, effective_latency_samples());
        const double usable = static_cast<double>(ahead > guard ? ahead - guard : 0);
        return now + static_cast<std::int64_t>(usable / rate_ * 1e9);
    }

    LatencyEstimator& estimator(int processor, dsp::MlsaTier tier) {
        return estimators_[processor * 2 + (tier == dsp::MlsaTier::Reduced ? 1 : 0)];
    }

    BlockJob* free_job() {
        for (auto& j : jobs_) {
            const bool awaiting_measure =
                std::any_of(abandoned_.begin(), abandoned_.end(),
                            [&](const Abandoned& a) { return a.job == j.get(); });
            if (!awaiting_measure && !j->in_use.load(std::memory_order_acquire)) return j.get();
        }
        return nullptr;
    }

    // Waits until the ring holds less than the latency target (so the
    // scheduler stays a fixed distance ahead) and has room for a block.
    bool wait_for_room(std::size_t block_samples, std::uint64_t gen) {
        for (;;) {
            if (cancelled(gen)) return false;
            const std::size_t fill = ring_.read_available();
            if (fill < std::max<std::size_t>(effective_latency_samples(), 1) &&
                ring_.write_available() >= block_samples + 16384 / 4)
                return true;
            std::unique_lock lock(mu_);
            if (shutdown_) return false;
            space_cv_.wait_for(lock, kSpacePoll);
        }
    }

    // Vocodes an utterance block by block. For each block the scheduler picks
    // the processor and tier expected to finish before the block's deadline,
    // waits until a cut-off that leaves time for a fallback, and if the first
    // choice has not finished by then gives the same block (same starting
    // state) to the other processor; a late result is discarded.
    bool schedule_blocks(const Utterance& u) {
        prepare_voice(*u.voice);
        dsp::MlsaVocoder& state = *state_;
        state.reset();
        NoiseSource noise;
        noise.restart();
        spectral_state_->reset();
        if (resampler_) resampler_->reset();
        const auto& f = u.frames;
        const std::size_t period = u.voice->vocoder_config().frame_period;
        const double ratio = rate_ / u.voice->sample_rate();
        const std::vector<Choice> choices = candidates();

        for (std::size_t first = 0; first < f.frames; first += frames_per_block_) {
            const std::size_t count = std::min(frames_per_block_, f.frames - first);
            const bool last = first + count == f.frames;
            const auto expected_out =
                static_cast<std::size_t>(static_cast<double>(count * period) * ratio) + 64;
            if (!wait_for_room(expected_out, u.generation)) return false;

            measure_abandoned();
            const std::int64_t now = rt::now_ns();
            const std::int64_t deadline = next_deadline_ns(now);
            BlockRecord rec;
            rec.index = next_block_index_++;
            rec.deadline_ns = deadline;
            rec.dispatched_ns = now;

            // Candidates in order of preference (see candidates()); a
            // processor is out while busy or after a device error.
            auto pick = [&](std::int64_t from, int exclude) -> std::optional<Choice> {
                PlanCandidate cands[kMaxChoices];
                const int n = static_cast<int>(choices.size());
                for (int i = 0; i < n; ++i) {
                    auto& e = estimator(choices[i].processor, choices[i].tier);
                    e.set_now(rec.index);
                    const BlockProcessor& p = processor(choices[i].processor);
                    // The GPU processor is shared by streams: it is "busy" for
                    // this stream only while one of this stream's jobs is on it.
                    const bool busy = choices[i].processor == 2 ? has_job_on(2) : p.busy();
                    cands[i] = {choices[i].processor, choices[i].tier, e.estimate_ns(),
                                busy || !p.healthy()};
                }
                const int i = choose_candidate(std::span(cands, static_cast<std::size_t>(n)), from,
                                               deadline, exclude);
                if (i < 0) return std::nullopt;
                return choices[static_cast<std::size_t>(i)];
            };

            std::optional<Choice> first_choice = pick(now, -1);
            if (!first_choice) {
                // Every processor still holds an abandoned job: wait for one.
                std::unique_lock lock(done_mu_);
                done_cv_.wait(lock,
                              [&] { return !primary_.busy() || !fallback_.busy() || shutdown_; });
                if (shutdown_) return false;
                first_choice = pick(rt::now_ns(), -1);
                if (!first_choice) first_choice = Choice{0, dsp::MlsaTier::Full};
            }
            BlockJob* job = dispatch(*first_choice, state, noise, f, first, count, last);
            if (!job) return false;

            // Cut-off: the latest moment another processor can still start
            // and be expected to finish before the deadline.
            std::int64_t fallback_est = INT64_MAX;
            for (const Choice& c : choices)
                if (c.processor != first_choice->processor)
                    fallback_est =
                        std::min(fallback_est, estimator(c.processor, c.tier).estimate_ns());
            const std::int64_t cutoff = deadline - fallback_est;
            BlockJob* result = job;
            Choice used = *first_choice;
            if (!wait_done(*job, cutoff, u.generation)) {
                if (cancelled(u.generation) || is_shutdown()) return false;
                // Missed the cut-off, or the device failed: another processor
                // produces the block from the same starting state instead.
                std::optional<Choice> fb = pick(rt::now_ns(), first_choice->processor);
                if (!fb && job->failed) fb = Choice{1, dsp::MlsaTier::Full};
                if (fb) {
                    if (BlockJob* second = dispatch(*fb, state, noise, f, first, count, last)) {
                        rec.fell_back = true;
                        result = second;
                        used = *fb;
                        std::lock_guard lock(mu_);
                        ++fallbacks_;
                    }
                }
                if (!wait_done(*result, INT64_MAX, u.generation)) return false;
                if (result->failed) return false;  // nothing left that can make it
            }
            // From hand-over to result, not compute alone: on a loaded or
            // virtual machine the worker's wake-up takes a share of the time
            // a cut-off leaves, and a block planned without it comes late.
            estimator(used.processor, used.tier)
                .add(result->finished_ns - result->submitted_ns, rec.index);
            if (result != job && !job->failed)
                abandoned_.push_back({job, first_choice->processor, first_choice->tier});

            // Commit: the block's end state becomes the stream's state.
            state = result->vocoder;
            noise = result->noise;
            *spectral_state_ = result->spectral;
            rec.processor = used.processor == 0   ? BlockRecord::Primary
                            : used.processor == 1 ? BlockRecord::Fallback
                                                  : BlockRecord::Gpu;
            rec.reduced_tier = used.tier == dsp::MlsaTier::Reduced;
            rec.started_ns = result->started_ns;
            rec.finished_ns = result->finished_ns;
            compute_ns_ += result->finished_ns - result->started_ns;
            record(rec);
            frames_vocoded_.add(count);

            const std::span<const float> block(result->samples.data(), result->sample_count);
            if (!emit(block, last, u)) return false;
        }
        return true;
    }

    // The candidates, best first: for the MLSA vocoder the stream's own CPU
    // processor then the fallback, at full then reduced quality; for the
    // spectral vocoder the GPU (if one was opened) then both CPU processors.
    const std::vector<Choice>& candidates() {
        choices_.clear();
        if (spectral_) {
            // Measured, not guessed: the GPU goes first only if its
            // calibration says it makes a block at least as fast as the CPU.
            const auto g = gpu_ ? gpu_->calibrated_block_ns() : 0;
            const auto c = primary_.calibrated_block_ns();
            // A device the user named explicitly always goes first.
            const bool gpu_first = gpu_ && (gpu_forced_ || c == 0 || (g > 0 && g <= c));
            if (gpu_first) choices_.push_back({2, dsp::MlsaTier::Full});
            choices_.push_back({0, dsp::MlsaTier::Full});
            choices_.push_back({1, dsp::MlsaTier::Full});
            if (gpu_ && !gpu_first) choices_.push_back({2, dsp::MlsaTier::Full});
        } else {
            const int n = options_.allow_reduced_tier ? 4 : 2;
            choices_.assign(std::begin(kChoices), std::begin(kChoices) + n);
        }
        return choices_;
    }

    bool has_job_on(int processor_index) const {
        for (const auto& j : jobs_)
            if (j && j->processor == processor_index && j->in_use.load(std::memory_order_acquire))
                return true;
        return false;
    }

    BlockProcessor& processor(int i) { return i == 0 ? primary_ : i == 1 ? fallback_ : *gpu_; }

    // A job abandoned after its cut-off still tells how slow its processor
    // was: measure it once it completes, so the estimate learns.
    void measure_abandoned() {
        std::erase_if(abandoned_, [&](const Abandoned& a) {
            if (!a.job->done.load(std::memory_order_acquire)) return false;
            estimator(a.processor, a.tier)
                .add(a.job->finished_ns - a.job->submitted_ns, next_block_index_);
            return true;
        });
    }

    BlockJob* dispatch(const Choice& choice, const dsp::MlsaVocoder& state,
                       const NoiseSource& noise, const AcousticFrames& f, std::size_t first,
                       std::size_t count, bool last) {
        BlockJob* job = free_job();
        if (!job) return nullptr;
        job->kind = spectral_ ? VocoderKind::Spectral : VocoderKind::Mlsa;
        job->vocoder = state;
        job->noise = noise;
        job->spectral = *spectral_state_;
        job->frames = &f;
        job->first_frame = first;
        job->frame_count = count;
        job->last_block = last;
        job->tier = choice.tier;
        job->processor = choice.processor;
        job->submitted_ns = rt::now_ns();
        processor(choice.processor).submit(job);
        return job;
    }

    // Waits for a job until `until_ns`; false on timeout, cancel or shutdown.
    bool wait_done(BlockJob& job, std::int64_t until_ns, std::uint64_t gen) {
        std::unique_lock lock(done_mu_);
        for (;;) {
            if (job.done.load(std::memory_order_acquire)) return !job.failed;
            if (cancelled(gen) || is_shutdown()) return false;
            const std::int64_t now = rt::now_ns();
            if (now >= until_ns) return false;
            const std::int64_t wait_ns = std::min<std::int64_t>(until_ns - now, 5'000'000);
            done_cv_.wait_for(lock, std::chrono::nanoseconds(wait_ns));
        }
    }

    // Resamples (if needed) and writes a block; the utterance's last block
    // also flushes the resampler.
    bool emit(std::span<const float> block, bool last, const Utterance& u) {
        if (!resampler_) return write_all(block, u.generation, u, last);
        const std::size_t m = resampler_->process(block, resampled_);
        if (!write_all(std::span<const float>(resampled_.data(), m), u.generation, u, false))
            return false;
        if (!last) return true;
        const std::size_t t = resampler_->process({}, resampled_, true);
        return write_all(std::span<const float>(resampled_.data(), t), u.generation, u, true);
    }

    // One chunk of a mel stream: the mel scheduler picks the tier by the
    // time left before this audio is due (what the ring still holds, plus
    // the latency budget before playback starts) and makes the audio.
    bool vocode_mel(const Utterance& u) {
        if (cancelled(u.generation)) {
            mel_->reset();
            return false;
        }
        // A reader that only uses read() (offline) sets no deadline; a live
        // one has what the ring holds (plus the latency budget before
        // playback starts).
        const std::size_t queued = ring_.read_available() + (u.mel_first ? latency_samples_ : 0);
        const auto budget_ns =
            live_consumer_.load(std::memory_order_relaxed)
                ? static_cast<std::int64_t>(static_cast<double>(queued) / rate_ * 1e9)
                : kNoDeadlineNs;
        MelChunkReport report;
        const auto dispatched = rt::now_ns();
        std::span<const float> audio;
        try {
            audio =
                mel_->process(u.mel, static_cast<int>(u.mel_frames), u.mel_last, budget_ns, report);
        } catch (const std::exception&) {
            mel_->reset();  // a device error the CPU could not cover either
            return false;
        }
        compute_ns_ += report.finished_ns - report.started_ns;
        BlockRecord rec;
        rec.index = next_block_index_++;
        rec.processor = report.tier == 0   ? BlockRecord::Gpu
                        : report.tier == 1 ? BlockRecord::Primary
                                           : BlockRecord::Fallback;
        rec.reduced_tier = report.tier == 2;
        rec.fell_back = report.fell_back;
        rec.dispatched_ns = dispatched;
        rec.started_ns = report.started_ns;
        rec.finished_ns = report.finished_ns;
        rec.deadline_ns = dispatched + budget_ns;
        record(rec);
        if (report.fell_back) {
            std::lock_guard lock(mu_);
            ++fallbacks_;
        }
        if (!u.mel_last && audio.empty()) return true;
        return write_all(audio, u.generation, u, u.mel_last);
    }

    // Writes audio a render worker made ahead of time, recording it as
    // blocks produced by the "ahead" processor.
    bool copy_into_ring(const Utterance& u) {
        if (u.state != Utterance::Rendered || cancelled(u.generation)) return false;
        const std::size_t period = u.voice->vocoder_config().frame_period;
        const auto chunk = static_cast<std::size_t>(
            static_cast<double>(frames_per_block_ * period) * rate_ / u.voice->sample_rate());
        std::span<const float> audio(u.audio);
        while (!audio.empty()) {
            const std::size_t n = std::min(chunk, audio.size());
            const bool last = n == audio.size();
            if (!wait_for_room(n, u.generation)) return false;
            BlockRecord rec;
            rec.index = next_block_index_++;
            rec.processor = BlockRecord::Ahead;
            const std::int64_t now = rt::now_ns();
            rec.dispatched_ns = u.render_started_ns;
            rec.started_ns = u.render_started_ns;
            rec.finished_ns = u.render_finished_ns;
            rec.deadline_ns = next_deadline_ns(now);
            record(rec);
            if (!write_all(audio.first(n), u.generation, u, last)) return false;
            audio = audio.subspan(n);
        }
        return true;
    }

    void record(const BlockRecord& rec) {
        std::lock_guard lock(mu_);
        records_[records_written_ % kRecordCapacity] = rec;
        ++records_written_;
        ++block_counts_[rec.processor];
        if (rec.finished_ns > rec.deadline_ns) ++late_blocks_;
        if (rec.reduced_tier) ++reduced_blocks_;
    }

    void finish_utterance(bool complete, double vocoder_seconds) {
        std::lock_guard lock(mu_);
        vocoder_seconds_ += vocoder_seconds;
        if (complete) {
            --outstanding_;
            sentences_spoken_.add();
        } else if (!shutdown_) {
            --outstanding_;
            sentences_dropped_.add();
        }
        data_cv_.notify_all();
    }

    void acknowledge(std::uint64_t gen) {
        ack_position_.store(ring_.write_position(), std::memory_order_relaxed);
        producer_generation_.store(gen, std::memory_order_release);
    }

    bool cancelled(std::uint64_t gen) const {
        return generation_.load(std::memory_order_acquire) != gen;
    }
    bool is_shutdown() {
        std::lock_guard lock(mu_);
        return shutdown_;
    }

    // Writes all of `samples`, waiting for ring space. False if the utterance
    // was cancelled or the stream is shutting down meanwhile. The last chunk
    // of an utterance goes in whole, after its end position is published.
    bool write_all(std::span<const float> samples, std::uint64_t gen, const Utterance& u,
                   bool last_chunk) {
        for (;;) {
            if (cancelled(gen)) return false;
            const bool fits = ring_.write_available() >= samples.size();
            if (fits || !last_chunk) {
                if (last_chunk) mark_end_if_last(samples.size());
                const std::size_t n = ring_.write(samples);
                if (n > 0) {
                    note_first_audio(u);
                    data_cv_.notify_all();
                }
                samples = samples.subspan(n);
                if (samples.empty()) return true;
            }
            std::unique_lock lock(mu_);
            if (shutdown_) return false;
            space_cv_.wait_for(lock, kSpacePoll);
        }
    }

    // Before the final chunk of the final queued sentence goes in, publish
    // where speech will end, so that pull() can tell "finished" from "late".
    void mark_end_if_last(std::size_t final_chunk) {
        std::lock_guard lock(mu_);
        if (outstanding_ == 1 && text_queue_.empty() && params_queue_.empty() && !analysing_)
            end_of_speech_.store(ring_.write_position() + final_chunk, std::memory_order_release);
    }

    void note_first_audio(const Utterance& u) {
        if (first_audio_pending_ && u.first_of_push) {
            first_audio_pending_ = false;
            std::lock_guard lock(mu_);
            first_audio_ms_ = seconds_since(u.pushed) * 1000.0;
        }
    }

    std::shared_ptr<EngineCore> engine_;
    const FliteVoice* voice_;
    const StreamOptions options_;
    const double rate_;
    const std::size_t latency_samples_;

    mutable std::mutex mu_;  // guards queues and slow statistics; never taken by pull()
    std::condition_variable work_cv_, space_cv_, data_cv_;
    std::deque<Sentence> text_queue_;
    std::deque<std::shared_ptr<Utterance>> params_queue_;
    const FliteVoice* next_voice_ = voice_;
    bool producer_busy_ = false;   // the producer is speaking an utterance
    std::size_t outstanding_ = 0;  // sentences queued and not yet fully written or dropped
    bool analysing_ = false;
    bool shutdown_ = false;
    std::uint64_t sentences_queued_ = 0, cancels_ = 0, sentences_unspeakable_ = 0;
    double first_audio_ms_ = -1.0, frontend_seconds_ = 0.0, vocoder_seconds_ = 0.0;

    rt::SpscRing<float> ring_;
    std::atomic<std::uint64_t> generation_{0};           // bumped by cancel()
    std::atomic<std::uint64_t> producer_generation_{0};  // last cancel the producer saw
    std::atomic<std::uint64_t> ack_position_{0};         // ring write position at that moment
    std::atomic<std::uint64_t> end_of_speech_{0};        // ring position where queued speech ends
    rt::Counter delivered_, underruns_, underrun_samples_;
    rt::Counter sentences_spoken_, sentences_dropped_, frames_vocoded_;
    rt::MaxGauge max_pull_;  // largest pull() so far: the consumer's period

    // Consumer-thread state.
    std::uint64_t consumer_generation_ = 0;
    bool cancel_faded_ = false;
    // Written by the consumer only; also read by the block scheduler
    // (next_deadline_ns), hence atomic (relaxed: a hint for planning).
    std::atomic<bool> in_speech_{false};
    std::size_t owed_ = 0;     // samples played as silence during an underrun, to skip
    std::size_t fade_in_ = 0;  // position in the fade-in after an underrun
    const std::size_t fade_len_, underrun_fade_len_;

    // Producer-thread state: the block scheduler.
    const std::size_t frames_per_block_;
    BlockProcessor primary_, fallback_;
    std::array<LatencyEstimator, 6> estimators_;  // (primary, fallback, gpu) x (full, reduced)
    std::vector<Choice> choices_;
    const bool spectral_;                  // this stream uses the spectral vocoder
    std::shared_ptr<BlockProcessor> gpu_;  // spectral only, when a GPU backend opened
    std::string gpu_note_;                 // why there is no GPU processor, if there is none
    std::string gpu_name_;
    bool gpu_forced_ = false;  // named by --backend/ETUDE_BACKEND, not chosen by calibration
    std::optional<gpu::SpectralStreamState> spectral_state_;
    std::array<std::unique_ptr<BlockJob>, 4> jobs_;
    struct Abandoned {
        BlockJob* job;
        int processor;
        dsp::MlsaTier tier;
    };
    std::vector<Abandoned> abandoned_;
    std::mutex done_mu_;
    std::condition_variable done_cv_;
    const FliteVoice* prepared_voice_ = nullptr;
    std::optional<dsp::MlsaVocoder> state_;
    std::optional<dsp::StreamingResampler> resampler_;
    std::unique_ptr<MelScheduler> mel_;       // mel streams only
    bool mel_open_ = false;                   // a mel utterance has begun and not ended (mu_)
    std::atomic<bool> live_consumer_{false};  // pull() has been called: there are deadlines
    std::vector<float> resampled_;
    std::uint64_t next_block_index_ = 0;
    std::int64_t compute_ns_ = 0;  // processor time of the utterance being scheduled
    bool first_audio_pending_ = false;

    // Block records (guarded by mu_).
    std::vector<BlockRecord> records_;
    std::size_t records_written_ = 0;
    std::uint64_t block_counts_[4] = {0, 0, 0, 0};
    std::uint64_t fallbacks_ = 0, late_blocks_ = 0, reduced_blocks_ = 0;

    std::thread producer_;
};

template <typename Job, typename Take>
std::pair<std::shared_ptr<StreamCore>, Job> EngineCore::next_job(Take take) {
    std::unique_lock lock(mu_);
    for (;;) {
        if (stopping_) return {};
        streams_.remove_if([](const auto& w) { return w.expired(); });
        const std::size_t count = streams_.size();
        auto it = streams_.begin();
        if (count) std::advance(it, round_robin_ % count);
        for (std::size_t i = 0; i < count; ++i) {
            if (auto s = it->lock()) {
                if (auto job = take(*s)) {
                    ++round_robin_;
                    return {std::move(s), std::move(job)};
                }
            }
            if (++it == streams_.end()) it = streams_.begin();
        }
        cv_.wait(lock);
    }
}

void EngineCore::run_front_end() {
    for (;;) {
        auto [stream, sentence] =
            next_job<std::optional<Sentence>>([](StreamCore& s) { return s.take_sentence(); });
        if (!stream) return;
        stream->analyse(std::move(*sentence));
    }
}

void EngineCore::run_renderer() {
    // Rendering ahead is less urgent than the sentence being spoken, which
    // the streams' block schedulers produce: yield the CPU to them.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 5);
    for (;;) {
        auto [stream, utterance] =
            next_job<std::shared_ptr<Utterance>>([](StreamCore& s) { return s.take_render_job(); });
        if (!stream) return;
        stream->render_ahead(utterance);
    }
}

// ---- Stream -----------------------------------------------------------------

Stream::Stream(std::shared_ptr<StreamCore> core) : core_(std::move(core)) {}
Stream::~Stream() = default;
void Stream::push_mel(std::span<const float> mel, std::size_t frames, bool last) {
    core_->push_mel(mel, frames, last);
}
std::size_t Stream::mel_bands() const {
    return core_->mel_bands();
}
std::size_t Stream::push_text(std::string_view text) {
    return core_->push_text(text);
}
std::size_t Stream::pull(std::span<float> out) noexcept {
    return core_->pull(out);
}
std::size_t Stream::read(std::span<float> out) {
    return core_->read(out);
}
void Stream::cancel() {
    core_->cancel();
}
void Stream::set_voice(std::string_view voice) {
    core_->set_voice(voice);
}
bool Stream::busy() const {
    return core_->busy();
}
double Stream::latency_ms() const {
    return core_->latency_ms();
}
double Stream::sample_rate() const {
    return core_->options().sample_rate;
}
const std::string& Stream::voice() const {
    return core_->voice().name();
}
StreamStats Stream::stats() const {
    return core_->stats();
}
std::vector<BlockRecord> Stream::block_records(std::size_t max) const {
    return core_->block_records(max);
}

void Stream::write_trace(const std::string& path) const {
    const auto records = block_records();
    std::ofstream out(path);
    if (!out) throw Error("cannot write trace file '" + path + "'");
    const std::int64_t t0 = records.empty() ? 0 : records.front().dispatched_ns;
    static const char* kNames[] = {"cpu-primary", "cpu-fallback", "cpu-ahead", "gpu"};
    out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
    for (int p = 0; p < 4; ++p)
        out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" << p + 1
            << ",\"args\":{\"name\":\"" << kNames[p] << "\"}},\n";
    for (const auto& r : records) {
        out << "{\"name\":\"block " << r.index << (r.reduced_tier ? " reduced" : "")
            << (r.fell_back ? " fallback" : "")
            << "\",\"cat\":\"block\",\"ph\":\"X\",\"pid\":1,\"tid\":"
            << static_cast<int>(r.processor) + 1 << ",\"ts\":" << (r.started_ns - t0) / 1000.0
            << ",\"dur\":" << (r.finished_ns - r.started_ns) / 1000.0
            << ",\"args\":{\"slack_ms\":" << r.slack_ms() << ",\"compute_ms\":" << r.compute_ms()
            << ",\"tier\":\"" << (r.reduced_tier ? "reduced" : "full") << "\"}},\n";
        out << "{\"name\":\"deadline " << r.index
            << "\",\"cat\":\"deadline\",\"ph\":\"i\",\"s\":\"t\""
            << ",\"pid\":1,\"tid\":" << static_cast<int>(r.processor) + 1
            << ",\"ts\":" << (r.deadline_ns - t0) / 1000.0 << "},\n";
    }
    // Device time per kernel (events on OpenCL/CUDA), as counters at the end.
    const double end_us = records.empty() ? 0 : (records.back().finished_ns - t0) / 1000.0;
    for (const auto& [device, timings] : core_->kernel_timings()) {
        if (timings.empty()) continue;
        out << "{\"name\":\"kernel ms total (" << device
            << ")\",\"ph\":\"C\",\"pid\":2,\"ts\":" << end_us << ",\"args\":{";
        for (std::size_t i = 0; i < timings.size(); ++i)
            out << (i ? "," : "") << "\"" << timings[i].name << "\":" << timings[i].total_ms;
        out << "}},\n";
    }
    out << "{\"name\":\"end\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":1,\"ts\":0}\n]}\n";
    if (!out) throw Error("writing trace file '" + path + "' failed");
}

// ---- Engine -----------------------------------------------------------------

Engine::Engine() : Engine(Options{}) {}

Engine::Engine(Options options) : core_(std::make_shared<EngineCore>()) {
    for (const auto& v : options.preload_voices) FliteVoice::load(v);
}

Engine::~Engine() {
    core_->stop();
}

const std::vector<std::string>& Engine::voices() {
    return FliteVoice::names();
}

std::unique_ptr<Stream> Engine::create_stream(const StreamOptions& options) {
    if (!(options.sample_rate >= kMinRate && options.sample_rate <= kMaxRate))
        throw Error("output sample rate " +
                    std::to_string(static_cast<long long>(options.sample_rate)) +
                    " Hz is outside the supported 8000-192000 Hz");
    if (!(options.latency_ms >= 5.0 && options.latency_ms <= 10000.0))
        throw Error("latency budget must be between 5 and 10000 ms");
    if (!(options.block_ms >= 5.0 && options.block_ms <= 200.0))
        throw Error("block length must be between 5 and 200 ms");
    const FliteVoice& voice = FliteVoice::load(options.voice);
    auto core = std::make_shared<StreamCore>(core_, voice, options);
    core->start();
    core_->add(core);
    return std::unique_ptr<Stream>(new Stream(std::move(core)));
}

}  // namespace etude::engine
