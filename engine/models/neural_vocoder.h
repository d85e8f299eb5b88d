// Neural vocoders from LEF files: HiFi-GAN (V1, V2, V3 and any config of the
// same family) and Vocos (mel model with the ISTFT head). The networks run on
// any gpu::Backend (CPU, OpenCL, CUDA) through the operations of backend.h,
// so there is one implementation of each network and three places to run it.
//
// Ownership: a NeuralModel holds the model's description and its weights,
// uploaded once to one backend; it is immutable after load and may be shared
// by many MelVocoderStreams, but runs one network at a time (an internal
// mutex guards its device workspace). A MelVocoderStream turns mel frames
// that arrive in chunks of any size into audio, keeping exactly the left and
// right context the network's receptive field needs, so that chunked output
// equals the whole-utterance output to float rounding.
//
// Errors: load() throws etude::Error naming the file and the field or tensor
// at fault; device failures surface as gpu::DeviceError from run calls.
// None of this is real-time safe: it runs on compute workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dsp/log_mel.h"
#include "engine/models/lef_file.h"
#include "gpu/backend.h"

namespace etude::engine {

// Audio side of a model, read from its metadata: what the mel front end that
// trained it computed, and the rate of the audio it produces.
struct ModelAudioParams {
    std::string architecture;  // "hifigan" or "vocos"
    int sample_rate = 0;
    int n_fft = 0, hop = 0, win_length = 0, n_mels = 0;
    double fmin = 0, fmax = 0;
    std::string mel_scale;  // "slaney" or "htk"
    std::string mel_norm;   // "slaney" or "none"
    double mel_power = 1;
    double log_floor = 1e-5;
    double magnitude_eps = 0;
    std::string padding;  // "reflect_half" (HiFi-GAN) or "center" (Vocos)
};

// The log-mel front end a model was trained with (for copy synthesis and
// for the phase-reconstruction tier).
dsp::LogMelConfig log_mel_config(const ModelAudioParams& audio);
// The audio parameters of the model in a LEF file, without building the
// network or uploading weights (the file is still validated whole). Throws
// etude::Error as NeuralModel::load does.
ModelAudioParams read_model_audio(const std::string& path);

// One network evaluation over a window of mel frames: the part of the model
// that depends on its weights. Implemented per architecture.
// A network run incrementally (engine/models/stream_layers.h): every layer keeps
// the input its kernel still needs, so each mel frame is computed once.
// Made by NeuralModel::open_stream(); one utterance at a time.
class NetworkStream {
  public:
    virtual ~NetworkStream() = default;
    virtual void reset() = 0;  // a new utterance
    // Takes `frames` more mel frames ([n_mels][frames]) and appends to
    // `values` those the network can now complete (values_per_frame() per
    // frame, in order; HiFi-GAN may end inside a frame). flush: the utterance
    // ends here, append everything left.
    virtual void push(const float* mel, int frames, bool flush, std::vector<float>& values) = 0;
};

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
};

class NeuralModel {
  public:
    // Validates metadata and every tensor shape, then uploads the weights to
    // `backend`. Throws etude::Error (file/field named) or gpu::DeviceError.
    static std::shared_ptr<NeuralModel> load(const std::string& path,
                                             std::shared_ptr<gpu::Backend> backend);
    static std::shared_ptr<NeuralModel> load(const LefFile& file, const std::string& label,
                                             std::shared_ptr<gpu::Backend> backend);

    const ModelAudioParams& audio() const { return audio_; }
    const std::string& label() const { return label_; }
    gpu::Backend& backend() const { return *backend_; }
    // Mel frames of context the network needs on each side of the frames it
    // produces (its receptive field, rounded up to whole frames).
    int left_context() const { return left_context_; }
    int right_context() const { return right_context_; }
    // Samples between the arrival of a mel frame and the moment the audio
    // centred on it can be produced, at the model's rate.
    int streaming_latency_samples() const;
    // Whole utterance, offline: mel is [n_mels][frames]; returns the audio
    // (HiFi-GAN: frames * hop samples; Vocos: (frames - 1) * hop, as
    // torch.istft with center=True).
    std::vector<float> vocode(std::span<const float> mel, int frames) const;
    // Network evaluation (used by MelVocoderStream); serialised internally.
    void run(const float* mel, int frames, int first, int count, float* out) const;
    int values_per_frame() const { return network_->values_per_frame(); }
    // See NetworkStream; null when the model cannot run that way.
    std::unique_ptr<NetworkStream> open_stream() const {
        return network_->open_stream(right_context_);
    }
    const std::vector<float>& synthesis_window() const { return window_; }  // Vocos' ISTFT window

  private:
    NeuralModel() = default;
    ModelAudioParams audio_;
    std::string label_;
    std::shared_ptr<gpu::Backend> backend_;
    std::unique_ptr<VocoderNetwork> network_;
    std::vector<float> window_;
    int left_context_ = 0, right_context_ = 0;
    mutable std::mutex run_mu_;
};

// Frames [first, first + count) of a mel laid out [n_mels][frames] (as
// PyTorch holds it), written to `out` in the same layout: a chunk as an
// upstream acoustic model would emit it.
void copy_mel_frames(std::span<const float> mel, int n_mels, int frames, int first, int count,
                     std::vector<float>& out);

// Where a model runs for a request "auto|cpu|cuda|opencl" (+ device index,
// -1 for the best; ETUDE_BACKEND/ETUDE_DEVICE fill what is left open). "auto"
// takes a GPU if there is one and the CPU otherwise (an OpenCL CPU device
// such as PoCL is slower than the BLAS path for these networks). A named
// backend that cannot be opened throws; `note` says what was chosen and why.
std::shared_ptr<gpu::Backend> open_model_backend(const std::string& kind, int device,
                                                 std::string* note = nullptr);

// Streams mel chunks to audio with one model. Not thread-safe: one producer.
class MelVocoderStream {
  public:
    explicit MelVocoderStream(std::shared_ptr<const NeuralModel> model);
    ~MelVocoderStream();
    // Appends `frames` mel frames given as [n_mels][frames] (a chunk as an
    // acoustic model emits it) and returns the audio that became final.
    std::vector<float> push(std::span<const float> mel, int frames);
    // No more frames for this utterance: returns the rest of the audio and
    // resets for the next utterance.
    std::vector<float> finish();
    // push() in two steps, so that a failed network run can be retried on
    // another backend: append() takes the frames, drain() runs the network
    // on what is ready (everything, if `final`; then the stream resets).
    void append(std::span<const float> mel, int frames);
    std::vector<float> drain(bool final);
    void reset();
    const NeuralModel& model() const { return *model_; }
    // Runs the next chunks on another copy of the same model (e.g. the CPU
    // copy after a GPU failure): the stream's state does not depend on where
    // the network runs, so the output stays exact.
    void set_model(std::shared_ptr<const NeuralModel> model);
    // Runs the network on frames [produced, end_frame), which must have their
    // right context (end_frame <= ready_frames()); an explicit end keeps two
    // models with different right contexts in step.
    std::vector<float> drain_to(long end_frame);
    // Lets another tier make the audio of frames [produced, end_frame): moves
    // on as drain_to() would have, without running the network, and returns
    // the number of samples the caller must supply instead (each frame's
    // context stays available, so the network takes over again exactly; for
    // Vocos it first reruns the skipped frames whose windows overlap its next
    // ones, so that the overlap-add is whole).
    std::size_t skip_to(long end_frame);
    long ready_frames() const;  // frames whose right context has arrived
    long received_frames() const { return received_; }
    long emitted_samples() const { return emitted_; }
    // Mel frames the network has been run on so far, context included: the
    // cost of streaming. Incremental runs (NetworkStream) take each frame
    // once, plus both contexts once after a switch of model or tier.
    std::uint64_t frames_run() const { return frames_run_; }
    // Opens the current model's incremental runner now (device memory for
    // every layer's state), so that the first chunk does not pay for it.
    // Throws gpu::DeviceError if the device cannot hold it.
    void prepare();
    // Frees the runner kept for `model` (not the current model), e.g. a GPU
    // copy that failed: the stream holds each model it has run otherwise.
    void release(const NeuralModel& model);
    // Frames the network would run if the next drain used `model`: what it
    // has not taken yet when its runner is active, else everything from the
    // left context of the next frame on (priming, or a recomputed window).
    long frames_to_run(const NeuralModel& model) const;
    // Off: every window recomputes its context (what models whose layers
    // cannot run incrementally always do); for tests and benchmarks.
    void set_incremental(bool on) {
        incremental_ = on;
        if (!on) drop_incremental();
    }

  private:
    void produce(long end_frame, bool final, std::vector<float>& out);
    void produce_pieces(long end_frame, bool final, std::vector<float>& out);
    void assemble(const float* values, int count, bool final, std::vector<float>& out);
    void run_window(long a, long b);  // network values of frames [a, b) into values_
    void gather_mel(long a, long b);  // history frames [a, b) into window_mel_, by channel
    void trim_history();
    void discard_overlap_before(long limit);  // Vocos: samples before `limit` are emitted
    // Vocos: adds frames [first, first + count) to the overlap-add, from
    // ola_start_ on (what lies before it was emitted already).
    void overlap_add(const float* values, long first, int count);
    void rebuild_overlap();
    bool use_incremental(bool final);
    void produce_incremental(long end_frame, bool final, std::vector<float>& out);
    void drop_incremental();
    // Vocos: frames before a position p * hop whose windows reach past it.
    int overlap_frames() const;
    long history_needed_from() const;

    std::shared_ptr<const NeuralModel> model_;
    int n_mels_ = 0;
    std::vector<float> history_;  // frame-major [frame][mel], from frame history_start_
    long history_start_ = 0;
    long received_ = 0;  // frames pushed so far
    long produced_ = 0;  // frames whose network output has been assembled
    std::vector<float> window_mel_, values_;
    // Vocos: overlap-add state (samples from ola_start_, in centred STFT time).
    std::vector<float> ola_, envelope_;
    long ola_start_ = 0;
    // Vocos after skip_to(): frames [rebuild_from_, produced_) were not run,
    // but their windows overlap what comes next; the network runs them
    // before its next frames so that the overlap-add is whole again (-1: none).
    long rebuild_from_ = -1;
    // An incremental runner per model this stream has run (at most the GPU
    // and CPU copies; null: the model recomputes context per window), kept
    // so that switching back and forth does not reallocate. The one for
    // model_, while active, has taken frames [.., inc_fed_) and its values
    // from frame pending_first_ on wait in pending_.
    NetworkStream* runner();
    // (The model is held too: a runner refers to its weights.)
    std::vector<std::pair<std::shared_ptr<const NeuralModel>, std::unique_ptr<NetworkStream>>>
        runners_;
    bool incremental_ = true, inc_active_ = false;
    long inc_fed_ = 0, pending_first_ = 0;
    std::vector<float> pending_;
    std::uint64_t frames_run_ = 0;
    long emitted_ = 0;  // output samples handed out
};

}  // namespace etude::engine
