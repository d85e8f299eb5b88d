// The interface a network family implements (models/hifigan.cpp,
// models/vocos.cpp): one evaluation over a window of mel frames, and an
// incremental runner on the same weights. NeuralModel holds one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace etude::engine {

class NetworkStream;

// Whether a push may join other streams' pushes in one batched backend call
// (models/stream_joiner.h), as its caller decides: the network knows what
// it can batch, not how urgent the caller's work is. A batch runs on its
// lane's thread, and the offline readers' lane runs below normal priority,
// as they do, so their work joins only other such work (JoinOffline, a
// joiner of its own): in their batches, live streams' chunks would wait
// behind everything else. Offline readers are a device's throughput
// case (a thousand streams read at once), so they batch too. Alone: at
// once, a batch of one.
enum class Batching { Join, JoinOffline, Alone };

// One stream's part in NetworkStream::push_together(): push()'s arguments.
struct StreamPush {
    NetworkStream* stream = nullptr;
    const float* mel = nullptr;
    int frames = 0;
    bool flush = false;
    std::vector<float>* values = nullptr;
};

class RecordingBudget;  // models/recorded_step.h

// The decoders' joiner (models/stream_joiner.h).
template <class Push>
class PushJoiner;
using StreamJoiner = PushJoiner<StreamPush>;

// How a stream's chunks ran on a backend that replays recordings natively
// (models/recorded_step.h): `recordings` made, chunks `replayed` from one,
// and chunks run `op_by_op` to size a key's buffers (the first one of each
// key). Chunks run op by op for want of a set are not counted, nor a batch
// of streams, nor a lone push of a stream with a slot: the network counts
// those (VocoderNetwork::batch_replay_stats()), per batch.
struct ReplayStats {
    std::uint64_t recordings = 0, replayed = 0, op_by_op = 0;
    ReplayStats& operator+=(const ReplayStats& o) {
        recordings += o.recordings;
        replayed += o.replayed;
        op_by_op += o.op_by_op;
        return *this;
    }
};

// A network run incrementally (models/stream_layers.h): every layer keeps
// the input its kernel still needs, so each mel frame is computed once.
// Made by NeuralModel::open_stream(); one utterance at a time.
class NetworkStream {
  public:
    virtual ~NetworkStream() = default;
    virtual void reset() = 0;  // a new utterance
    // Takes `frames` more mel frames ([n_mels][frames]) and appends to
    // `values` those the network can now complete (values_per_frame() per
    // frame, in order; HiFi-GAN may end inside a frame). flush: the utterance
    // ends here, append everything left. batching: whether it may run in a
    // batch with other streams' pushes, where the network can batch them.
    virtual void push(const float* mel, int frames, bool flush, std::vector<float>& values,
                      Batching batching) = 0;
    // Several streams' pushes at once, each stream once, run by this
    // stream, which need not be one of them (in a joiner's batch it is the
    // first push's stream).
    // Each stream's values are those its own push() would append (HiFi-GAN
    // on the CPU's direct convolutions: bit for bit, unless the streams'
    // networks differ in a bias, which a batch adds after the sum). For
    // HiFi-GAN, streams whose chunks line up run each layer as one batched
    // backend call: on a GPU about twice as fast for 16 streams in 4-frame
    // chunks (an H200, docs/benchmarks.md); on the CPU 5-10% slower, since
    // stream by stream each chunk stays in cache from layer to layer. Streams
    // of another network, or a network that cannot join them (Vocos), push
    // one after another. The engine calls it through models/stream_joiner.h
    // on a GPU.
    virtual void push_together(std::span<const StreamPush> pushes) {
        for (const auto& p : pushes)
            p.stream->push(p.mel, p.frames, p.flush, *p.values, Batching::Alone);
    }
    // How long the next joined pushes may wait for the other streams of
    // their lane (models/stream_joiner.h; rt::now_ns()'s clock, 0: not at
    // all), where the network's streams join.
    virtual void set_join_wait_until(std::int64_t) {}
    // The utterance ends without its flush (cancelled, or its state
    // dropped): the lane's batches stop waiting for this stream's next push
    // (reset() does too; the next push joins again).
    virtual void leave_join_lane() {}
    // Whether a lone push may replay a recording of its chunk's device
    // work where the backend replays natively (on until switched off: for
    // tests and benchmarks that compare with the operations one by one).
    virtual void set_replay(bool) {}
    virtual ReplayStats replay_stats() const { return {}; }
};

// One network evaluation over a window of mel frames: the part of the model
// that depends on its weights. Implemented per architecture.
class VocoderNetwork {
  public:
    virtual ~VocoderNetwork() = default;
    // Values produced per mel frame: HiFi-GAN gives `hop` audio samples;
    // Vocos gives one inverse-FFT frame of n_fft samples (not yet windowed
    // or overlap-added).
    virtual int values_per_frame() const = 0;
    // Runs the network on `frames` mel frames, `mel` holding them channel by
    // channel ([n_mels][frames], as PyTorch holds a mel), and writes the
    // values of frames [first, first + count) to `out`.
    virtual void run(const float* mel, int frames, int first, int count, float* out) = 0;
    // An incremental runner on the same weights and backend, or null when a
    // layer's shape does not allow one (the stream then recomputes context).
    virtual std::unique_ptr<NetworkStream> open_stream(int right_context) const = 0;
    // Whether the streams' pushes, made on their own threads, meet in
    // batches (models/stream_joiner.h); while they do, the joiner of pushes
    // of that kind (Join, JoinOffline; Alone: none), else null.
    // Networks that cannot batch streams never do.
    virtual void set_join_streams(bool) {}
    virtual StreamJoiner* joiner(Batching) const { return nullptr; }
    // Backend calls that ran two or more streams' layers (push_together),
    // as issued op by op or recorded (a replay issues none of its own).
    // Networks that share their weights (a voice's speakers) share their
    // batches (shared_batching.h): each counts them all.
    virtual std::uint64_t batched_layer_calls() const { return 0; }
    // The batches of streams side by side (a lone push of a stream with a
    // slot too) replayed from recordings
    // (recorded_step.h: RecordedBatches), counted per batch as
    // NetworkStream::replay_stats() counts a lone stream's chunks (as
    // above, for every network sharing the weights).
    virtual ReplayStats batch_replay_stats() const { return {}; }
    // The same network with its first convolution's bias replaced by
    // `input_bias` and every other weight shared, not copied (a Piper
    // voice's speakers differ only there): this network must outlive it.
    // Null where the network cannot (then the caller loads it whole);
    // throws std::invalid_argument for a bias of another size.
    virtual std::unique_ptr<VocoderNetwork> sharing_weights(std::span<const float>) const {
        return nullptr;
    }
    // What its streams' lone recordings may hold together
    // (models/recorded_step.h); null where they record nothing.
    virtual RecordingBudget* lone_recordings() const { return nullptr; }
};

}  // namespace etude::engine
