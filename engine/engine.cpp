#include "engine/engine.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "engine/flite_voice.h"
#include "engine/text_input.h"
#include "engine/utterance_renderer.h"
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
constexpr auto kSpacePoll = std::chrono::milliseconds(2);

struct Sentence {
    std::string text;
    std::uint64_t generation;
    Clock::time_point pushed;
    bool first_of_push;
};

// An analysed sentence. Its audio is made either by the stream's vocoder
// thread straight into the ring (the sentence being spoken), or ahead of
// time into `audio` by an engine render worker (the sentences after it).
struct Utterance {
    enum State { Pending, Streaming, WorkerRendering, Rendered, Abandoned };
    AcousticFrames frames;
    std::uint64_t generation = 0;
    Clock::time_point pushed;
    bool first_of_push = false;
    State state = Pending;     // guarded by the stream's mutex
    std::vector<float> audio;  // valid once state == Rendered
};

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
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
};

class StreamCore {
  public:
    StreamCore(std::shared_ptr<EngineCore> engine, const FliteVoice& voice, StreamOptions options)
        : engine_(std::move(engine)),
          voice_(voice),
          options_(std::move(options)),
          ring_(static_cast<std::size_t>(options_.sample_rate * options_.buffer_seconds) + 4096),
          fade_len_(std::max<std::size_t>(
              1,
              static_cast<std::size_t>(options_.sample_rate * options_.cancel_fade_ms / 1000.0))),
          renderer_(voice, options_.sample_rate) {}

    void start() {
        producer_ = std::thread([this] { produce(); });
    }

    ~StreamCore() {
        {
            std::lock_guard lock(mu_);
            shutdown_ = true;
        }
        work_cv_.notify_all();
        space_cv_.notify_all();
        if (producer_.joinable()) producer_.join();
    }

    // ---- any thread -------------------------------------------------------
    std::size_t push_text(std::string_view text) {
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
            bool first = true;
            for (auto& p : pieces) {
                text_queue_.push_back({std::move(p), gen, now, first});
                first = false;
            }
            outstanding_ += pieces.size();
            sentences_queued_ += pieces.size();
        }
        engine_->wake();
        return pieces.size();
    }

    void cancel() {
        std::size_t dropped;
        {
            std::lock_guard lock(mu_);
            dropped = text_queue_.size() + params_queue_.size();
            outstanding_ -= dropped;
            text_queue_.clear();
            params_queue_.clear();
            generation_.fetch_add(1, std::memory_order_release);
            ++cancels_;
        }
        sentences_dropped_.fetch_add(dropped, std::memory_order_relaxed);
        work_cv_.notify_all();
        space_cv_.notify_all();
    }

    bool busy() const {
        std::lock_guard lock(mu_);
        return outstanding_ > 0 || ring_.read_available() > 0;
    }

    StreamStats stats() const {
        StreamStats s;
        s.samples_delivered = delivered_.load(std::memory_order_relaxed);
        s.underruns = underruns_.load(std::memory_order_relaxed);
        s.underrun_samples = underrun_samples_.load(std::memory_order_relaxed);
        s.sentences_spoken = sentences_spoken_.load(std::memory_order_relaxed);
        s.sentences_dropped = sentences_dropped_.load(std::memory_order_relaxed);
        s.frames_vocoded = frames_vocoded_.load(std::memory_order_relaxed);
        std::lock_guard lock(mu_);
        s.sentences_queued = sentences_queued_;
        s.cancels = cancels_;
        s.first_audio_ms = first_audio_ms_;
        s.frontend_seconds = frontend_seconds_;
        s.vocoder_seconds = vocoder_seconds_;
        return s;
    }

    // ---- real-time consumer -----------------------------------------------
    std::size_t pull(std::span<float> out) noexcept {
        const auto target = generation_.load(std::memory_order_acquire);
        if (target != consumer_generation_) return pull_cancelled(out, target);

        const std::size_t n = ring_.read(out);
        std::fill(out.begin() + static_cast<long>(n), out.end(), 0.0f);
        if (n > 0) in_speech_ = true;
        if (n < out.size() && in_speech_) {
            if (ring_.read_position() == end_of_speech_.load(std::memory_order_acquire)) {
                in_speech_ = false;  // everything queued has been played
            } else {
                underruns_.fetch_add(1, std::memory_order_relaxed);
                underrun_samples_.fetch_add(out.size() - n, std::memory_order_relaxed);
            }
        }
        delivered_.fetch_add(n, std::memory_order_relaxed);
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
            delivered_.fetch_add(n, std::memory_order_relaxed);
            if (n > 0) {
                space_cv_.notify_one();
                continue;
            }
            std::unique_lock lock(mu_);
            data_cv_.wait_for(lock, std::chrono::milliseconds(50), [&] {
                return ring_.read_available() > 0 || outstanding_ == 0 || shutdown_;
            });
            if (ring_.read_available() == 0 && (outstanding_ == 0 || shutdown_)) break;
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
            frames = voice_.analyse(sentence.text);
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
                u->generation = sentence.generation;
                u->pushed = sentence.pushed;
                u->first_of_push = sentence.first_of_push;
                params_queue_.push_back(std::move(u));
            } else {
                // Nothing to say (only symbols Flite skips, or a front-end
                // error), or cancelled while being analysed: cancel() counts
                // only the queued sentences, so this one is settled here.
                --outstanding_;
                sentences_dropped_.fetch_add(1, std::memory_order_relaxed);
            }
        }
        work_cv_.notify_all();
        data_cv_.notify_all();
        engine_->wake();  // a render worker may take it
    }

    // ---- render workers ---------------------------------------------------
    // Claims an analysed sentence that is not about to be streamed by this
    // stream's own vocoder thread (that one goes straight to the ring, for
    // the lowest latency). Called with the engine's lock held.
    std::shared_ptr<Utterance> take_render_job() {
        std::lock_guard lock(mu_);
        if (shutdown_) return nullptr;
        // While the vocoder thread is idle it will take the head itself.
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
        UtteranceRenderer renderer(voice_, options_.sample_rate);
        std::vector<float> audio;
        audio.reserve(static_cast<std::size_t>(static_cast<double>(u->frames.frames) *
                                               voice_.vocoder_config().frame_period *
                                               options_.sample_rate / voice_.sample_rate()) +
                      1024);
        const bool done = renderer.render(u->frames, [&](std::span<const float> chunk, bool) {
            audio.insert(audio.end(), chunk.begin(), chunk.end());
            return !cancelled(u->generation);
        });
        {
            std::lock_guard lock(mu_);
            u->audio = std::move(audio);
            u->state = done ? Utterance::Rendered : Utterance::Abandoned;
            vocoder_seconds_ += seconds_since(t0);
        }
        if (done) frames_vocoded_.fetch_add(u->frames.frames, std::memory_order_relaxed);
        work_cv_.notify_all();
    }

    const FliteVoice& voice() const { return voice_; }
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
        delivered_.fetch_add(n, std::memory_order_relaxed);
        in_speech_ = false;
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

    // ---- producer (vocoder) thread ----------------------------------------
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
                acknowledge(gen);
                continue;
            }
            std::shared_ptr<Utterance> u = std::move(params_queue_.front());
            params_queue_.pop_front();
            producer_busy_ = true;
            const bool mine = u->state == Utterance::Pending;
            if (mine) u->state = Utterance::Streaming;
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
            const bool complete = mine ? stream_into_ring(*u) : copy_into_ring(*u);
            finish_utterance(complete);
        }
    }

    // Vocodes an utterance straight into the ring, chunk by chunk.
    bool stream_into_ring(const Utterance& u) {
        const auto t0 = Clock::now();
        const bool complete =
            renderer_.render(u.frames, [&](std::span<const float> chunk, bool last) {
                return write_all(chunk, u.generation, u, last);
            });
        if (complete) frames_vocoded_.fetch_add(u.frames.frames, std::memory_order_relaxed);
        std::lock_guard lock(mu_);
        vocoder_seconds_ += seconds_since(t0);
        return complete;
    }

    // Writes audio a render worker made ahead of time.
    bool copy_into_ring(const Utterance& u) {
        if (u.state != Utterance::Rendered || cancelled(u.generation)) return false;
        constexpr std::size_t kChunk = 4096;
        std::span<const float> audio(u.audio);
        while (audio.size() > kChunk) {
            if (!write_all(audio.first(kChunk), u.generation, u, false)) return false;
            audio = audio.subspan(kChunk);
        }
        return write_all(audio, u.generation, u, true);
    }

    void finish_utterance(bool complete) {
        std::lock_guard lock(mu_);
        if (complete) {
            --outstanding_;
            sentences_spoken_.fetch_add(1, std::memory_order_relaxed);
        } else if (!shutdown_) {
            --outstanding_;
            sentences_dropped_.fetch_add(1, std::memory_order_relaxed);
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
    const FliteVoice& voice_;
    const StreamOptions options_;

    mutable std::mutex mu_;  // guards the queues and the slow statistics; never taken by pull()
    std::condition_variable work_cv_, space_cv_, data_cv_;
    std::deque<Sentence> text_queue_;
    std::deque<std::shared_ptr<Utterance>> params_queue_;
    bool producer_busy_ = false;   // the vocoder thread is speaking an utterance
    std::size_t outstanding_ = 0;  // sentences queued and not yet fully written or dropped
    bool analysing_ = false;
    bool shutdown_ = false;
    std::uint64_t sentences_queued_ = 0, cancels_ = 0;
    double first_audio_ms_ = -1.0, frontend_seconds_ = 0.0, vocoder_seconds_ = 0.0;

    rt::SpscRing<float> ring_;
    std::atomic<std::uint64_t> generation_{0};           // bumped by cancel()
    std::atomic<std::uint64_t> producer_generation_{0};  // last cancel the producer saw
    std::atomic<std::uint64_t> ack_position_{0};         // ring write position at that moment
    std::atomic<std::uint64_t> end_of_speech_{0};        // ring position where queued speech ends
    std::atomic<std::uint64_t> delivered_{0}, underruns_{0}, underrun_samples_{0};
    std::atomic<std::uint64_t> sentences_spoken_{0}, sentences_dropped_{0}, frames_vocoded_{0};

    // Consumer-thread state.
    std::uint64_t consumer_generation_ = 0;
    bool cancel_faded_ = false;
    bool in_speech_ = false;
    const std::size_t fade_len_;

    // Producer-thread state.
    UtteranceRenderer renderer_;
    bool first_audio_pending_ = false;
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
    // the streams' own vocoder threads produce: yield the CPU to them.
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
bool Stream::busy() const {
    return core_->busy();
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
    if (!(options.buffer_seconds > 0.0 && options.buffer_seconds <= 60.0))
        throw Error("stream buffer must be between 0 and 60 seconds");
    const FliteVoice& voice = FliteVoice::load(options.voice);
    auto core = std::make_shared<StreamCore>(core_, voice, options);
    core->start();
    core_->add(core);
    return std::unique_ptr<Stream>(new Stream(std::move(core)));
}

}  // namespace etude::engine
