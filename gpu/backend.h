// One interface over every place the engine's heavy DSP can run: the CPU,
// OpenCL devices (GPUs, or PoCL on the CPU), CUDA GPUs and Vulkan devices
// (any vendor's GPU, or lavapipe on the CPU). Each backend lives in its own
// folder (gpu/cpu, gpu/opencl, gpu/cuda, gpu/vulkan) and implements this
// class; nothing outside gpu/ knows which one it talks to.
//
// Data: every buffer holds 32-bit floats; complex spectra are interleaved
// (re, im) pairs, n/2+1 of them per real transform of length n. Matrices are
// row-major.
//
// Threads: a Backend may be used from several threads, but a Queue from one
// thread at a time. Calls on a queue are asynchronous (they return before
// the device has finished) unless documented otherwise; synchronize() waits.
// Errors: every backend call is checked; a failure throws gpu::DeviceError
// (or gpu::OutOfMemory) and marks the backend unhealthy (see health()).
// None of this is real-time safe: it runs on compute workers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::gpu {

enum class BackendKind { Cpu, OpenCl, Cuda, Vulkan };
const char* to_string(BackendKind kind);

struct DeviceInfo {
    BackendKind kind = BackendKind::Cpu;
    int index = 0;     // position among the devices of its backend
    std::string name;  // e.g. "NVIDIA H100 80GB HBM3", "pthread-Intel Xeon"
    std::string vendor;
    std::string platform;           // OpenCL platform, "CUDA 13.0" or "Vulkan 1.3.230"
    std::string driver;             // driver / runtime version
    std::size_t global_memory = 0;  // bytes
    int compute_units = 0;
    bool is_gpu = false;
    std::vector<std::string> capabilities;  // e.g. "fft", "gemm", "profiling", "fp64";
                                            // Vulkan: its type, "discrete", "integrated", "cpu"
};

class DeviceError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};
class OutOfMemory : public DeviceError {
  public:
    using DeviceError::DeviceError;
};

class Backend;

// Whoever hands out device memory gets it back through this: the backend
// itself (raw allocations) or a MemoryPool (reused allocations).
class MemoryOwner {
  public:
    virtual void release(void* handle, std::size_t bytes, const char* tag) noexcept = 0;

  protected:
    ~MemoryOwner() = default;
};

// Device memory, owned: given back to its owner on destruction (a view made
// by borrow() owns nothing and gives nothing back).
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    DeviceBuffer(MemoryOwner* owner, void* handle, std::size_t bytes, const char* tag)
        : owner_(owner), handle_(handle), bytes_(bytes), tag_(tag) {}
    DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer();

    void* handle() const {
        return handle_;
    }  // cl_mem, device pointer, vk::Allocation*, or host pointer
    std::size_t bytes() const { return bytes_; }
    std::size_t floats() const { return bytes_ / sizeof(float); }
    const char* tag() const { return tag_; }
    explicit operator bool() const { return handle_ != nullptr; }
    // The same memory, not owned: the view gives nothing back when it goes,
    // so whoever holds it must keep this buffer's owner alive for as long
    // (a network that shares another's weights holds that network).
    DeviceBuffer borrow() const { return DeviceBuffer(nullptr, handle_, bytes_, tag_); }
    // Whether it frees its memory when it goes (false for a borrowed view).
    bool owns() const { return owner_ != nullptr; }

  private:
    MemoryOwner* owner_ = nullptr;
    void* handle_ = nullptr;
    std::size_t bytes_ = 0;
    const char* tag_ = "";
};

// Page-locked host memory for fast asynchronous copies; owned.
class PinnedBuffer {
  public:
    PinnedBuffer() = default;
    PinnedBuffer(Backend* owner, float* data, std::size_t floats)
        : owner_(owner), data_(data), floats_(floats) {}
    PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    ~PinnedBuffer();
    float* data() const { return data_; }
    std::size_t floats() const { return floats_; }

  private:
    Backend* owner_ = nullptr;
    float* data_ = nullptr;
    std::size_t floats_ = 0;
};

struct OpLog;  // the fallback recording's operations (gpu/backend_recording.cpp)

// An in-order command queue (CUDA stream, OpenCL command queue, a Vulkan
// command buffer submitted on synchronize(); on the CPU work runs at once). Created by
// Backend::create_queue(); owned.
class Queue {
  public:
    Queue();
    virtual ~Queue() = default;
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
    // Whether a Backend::record() body is being recorded on this queue.
    bool recording() const { return recording_; }

  private:
    friend class Backend;
    std::uint64_t id_;  // unique in the process: a Recording names its queue by it
    bool recording_ = false;
    std::size_t recorded_ops_ = 0;
    OpLog* op_log_ = nullptr;  // where the fallback logs the body's operations
};

// What a backend keeps of a recording (a Vulkan command buffer, a CUDA
// graph, or the fallback's log of operations).
class RecordedWork {
  public:
    virtual ~RecordedWork() = default;
};

// A step's device commands, recorded once by Backend::record() and run
// again by Backend::replay(). Move-only; empty when default-constructed or
// moved from. Destroy it before its backend (like a DeviceBuffer); it may
// die while a replay of it is still queued (the queue keeps what it needs).
class Recording {
  public:
    Recording() = default;
    Recording(Recording&&) noexcept = default;
    Recording& operator=(Recording&&) noexcept = default;
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

    bool empty() const { return work_ == nullptr; }
    // True where the device itself keeps the commands (a Vulkan command
    // buffer, a CUDA graph): a replay is one submission. False for the
    // fallback (CPU, OpenCL), which replays by calling the recorded
    // operations one by one, with the arguments they were recorded with.
    bool replays_natively() const { return native_; }
    // The operations the body issued (operations on empty sizes, which are
    // no-ops, are not counted).
    std::size_t operations() const { return operations_; }

  private:
    friend class Backend;
    const Backend* backend_ = nullptr;
    std::uint64_t queue_id_ = 0;
    std::shared_ptr<RecordedWork> work_;
    bool native_ = false;
    std::size_t operations_ = 0;
};

// Element-wise functions. `alpha` is the leaky-ReLU slope; unused otherwise.
enum class Activation { LeakyRelu, Gelu, Tanh, Exp, Sin, Cos };
const char* to_string(Activation a);

// 1-D convolution with PyTorch's conventions (cross-correlation):
//   x: [batch][in_channels][in_length]
//   conv1d weights:           [out_channels][in_channels / groups][kernel]
//   conv_transpose1d weights: [in_channels][out_channels / groups][kernel]
//   y: [batch][out_channels][out_length], with
//   conv1d:           out_length = (in_length + 2*padding - dilation*(kernel-1) - 1) / stride + 1
//   conv_transpose1d: out_length = (in_length - 1)*stride - 2*padding + dilation*(kernel-1) + 1
struct Conv1dShape {
    int batch = 1, in_channels = 1, out_channels = 1, in_length = 1, kernel = 1;
    int stride = 1, dilation = 1, padding = 0, groups = 1;
    int conv_out_length() const {
        return (in_length + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
    }
    int transpose_out_length() const {
        return (in_length - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1;
    }
};

struct KernelTiming {
    std::string name;  // op or copy ("h2d", "d2h")
    std::uint64_t calls = 0;
    double total_ms = 0;  // measured on the device (events) where the backend can
    double max_ms = 0;
};

enum class Health { Ok, Failed };

// Test/drill hook: make `count` operations (after `after` normal ones) fail,
// run out of memory, or finish `delay_ms` late. The engine applies the
// device faults of ETUDE_FAULT (engine/scheduling/fault_plan.h) to the devices it opens.
struct GpuFault {
    enum Kind { None, KernelFailure, OutOfMemory, Late } kind = None;
    int count = 0;        // how many operations are affected
    double delay_ms = 0;  // Late: by how much
    int after = 0;        // operations that run normally first
};
// Parses one device item of ETUDE_FAULT, "KIND:COUNT[:DELAY_MS[:AFTER]]" with KIND
// one of kernel, oom, late (e.g. "kernel:2:0:500"); nullopt if malformed.
std::optional<GpuFault> parse_gpu_fault(const std::string& text);

// The arithmetic of a backend's matrix products and convolutions.
enum class MathPrecision {
    Fp32,  // IEEE single precision throughout (every backend; the default)
    Tf32,  // tensor cores: inputs rounded to 10 bits of mantissa, sums in FP32 (CUDA)
};

class Backend : public MemoryOwner {
  public:
    virtual ~Backend() = default;
    virtual const DeviceInfo& info() const = 0;

    // The precision of the GEMMs and convolutions issued from now on, on
    // every queue (work already queued keeps its own). Returns false,
    // changing nothing, where the backend has no such mode: only CUDA has
    // Tf32 (DeviceRegistry::set_math_precision sets it for every device,
    // as `--precision tf32` asks). Opt-in:
    // the parity bounds are Fp32's; Tf32's distance from it is measured in
    // dB (tests/engine/models/vits_precision_test.cpp).
    virtual bool set_math_precision(MathPrecision p) { return p == MathPrecision::Fp32; }
    virtual MathPrecision math_precision() const { return MathPrecision::Fp32; }

    // ---- memory (prefer gpu::MemoryPool, which wraps these) ----
    // Throws OutOfMemory when the device has no room.
    virtual void* raw_allocate(std::size_t bytes) = 0;
    virtual void raw_free(void* handle) noexcept = 0;
    virtual float* allocate_pinned(std::size_t floats) = 0;
    virtual void free_pinned(float* p) noexcept = 0;
    DeviceBuffer allocate(std::size_t floats, const char* tag);  // straight from the device
    void release(void* handle, std::size_t, const char*) noexcept override { raw_free(handle); }

    // The operations below are not virtual: each checks its arguments here,
    // once for every backend, and then calls the backend's *_impl hook. A
    // buffer too small for the shape, a shape that makes no sense (groups
    // that do not divide the channels, stride or hop <= 0, negative padding)
    // or one buffer passed as two that must be distinct throws
    // std::invalid_argument naming the op and the argument, before anything
    // is queued: on a GPU an out-of-bounds access does not fail cleanly but
    // corrupts the context for the whole process. Sizes of zero (or shapes
    // with no output) are no-ops, here, before any backend sees them.
    // None of this runs in the audio callback, so throwing is fine.

    // ---- queues, copies, synchronisation ----
    virtual std::unique_ptr<Queue> create_queue() = 0;
    // Asynchronous; the host memory must stay valid until synchronize().
    void copy_to_device(Queue& q, DeviceBuffer& dst, std::size_t dst_offset_floats,
                        const float* src, std::size_t floats);
    void copy_to_host(Queue& q, float* dst, const DeviceBuffer& src, std::size_t src_offset_floats,
                      std::size_t floats);
    void fill(Queue& q, DeviceBuffer& dst, float value, std::size_t floats);
    virtual void synchronize(Queue& q) = 0;

    // ---- kernels (the operations of the kernel registry) ----
    // y[i] = f(x[i]) for i < n; x and y may be the same buffer.
    void activation(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n,
                    float alpha = 0.0f);
    // C[m x n] = alpha * op(A) * op(B) + beta * C, row-major; op(A) is m x k,
    // op(B) is k x n; lda/ldb/ldc are the row strides of A, B, C as stored.
    void gemm(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb, float beta,
              DeviceBuffer& c, int ldc);
    // `bias` may be empty (no bias): then y is just the convolution.
    void conv1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x, const DeviceBuffer& w,
                const DeviceBuffer& bias, DeviceBuffer& y);
    void conv_transpose1d(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                          const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y);
    // Each of `rows` rows of length `cols`: (x - mean) / sqrt(var + eps) * gamma + beta
    // (biased variance, as torch.nn.LayerNorm).
    void layer_norm(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                    const DeviceBuffer& gamma, const DeviceBuffer& beta, DeviceBuffer& y);
    // y = alpha * x + beta * y over n floats. beta == 0 overwrites y (what it
    // held is ignored, even NaN); x and y may be the same buffer.
    void axpby(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
               DeviceBuffer& y);
    // Copies a block of `rows` rows of `cols` floats between distinct buffers:
    // dst[dst_offset + r*dst_stride + c] = src[src_offset + r*src_stride + c].
    // dst's rows may not overlap (dst_stride >= cols when rows > 1).
    // Streaming vocoders keep each channel's last samples this way.
    void copy_rows(Queue& q, int rows, int cols, const DeviceBuffer& src, std::size_t src_offset,
                   std::size_t src_stride, DeviceBuffer& dst, std::size_t dst_offset,
                   std::size_t dst_stride);
    // Blocks of rows between a batch's items and slots of one size side by
    // side in one buffer (streams' held samples: engine/models/batch_major.h's
    // HeldSlots), item b's slot named by `index` on the device: its b-th
    // float, a whole number. So a recorded batch (record()) serves any
    // streams in those slots, the index uploaded anew before each replay.
    // Item b's block of rows x cols lies in the batch's buffer at
    // batch_at + b * rows * batch_stride, row stride batch_stride, and in
    // the slots' at slot_at + index[b] * slot_floats, row stride slot_stride.
    // An index outside [0, slots) copies nothing for its item. A scatter's
    // indices must differ (two items into one slot: either may land).
    // Index, slots and batch are distinct buffers.
    struct SlotRows {
        int items = 0, rows = 0, cols = 0;
        std::size_t slot_at = 0, slot_floats = 0, slot_stride = 0;
        int slots = 0;  // how many the slots' buffer holds
        std::size_t batch_at = 0, batch_stride = 0;
    };
    void gather_slot_rows(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                          const DeviceBuffer& slots, DeviceBuffer& batch);
    void scatter_slot_rows(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                           const DeviceBuffer& batch, DeviceBuffer& slots);
    // y[c][r] = x[r][c]: x is rows x cols, y is cols x rows (distinct buffers).
    void transpose(Queue& q, int rows, int cols, const DeviceBuffer& x, DeviceBuffer& y);
    // Broadcast bias on a rows x cols matrix, in place:
    // per_row ? y[r][c] += bias[r] : y[r][c] += bias[c].
    void add_bias(Queue& q, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                  DeviceBuffer& y);
    // Polar to complex for spectral heads (Vocos' ISTFT head): x is
    // [frames][2*bins], each row `bins` log-magnitudes then `bins` phases;
    // y is [frames][bins] interleaved complex with
    // y = min(exp(logmag), max_magnitude) * (cos(phase), sin(phase)).
    // x and y are distinct buffers (same size: 2 * frames * bins floats).
    void polar_spectrum(Queue& q, int frames, int bins, float max_magnitude, const DeviceBuffer& x,
                        DeviceBuffer& y);
    // Batched real FFT of length n: in [batch][n] -> out [batch][n/2+1] complex
    // (distinct buffers, as for the inverse).
    void rfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out);
    // Batched inverse, scaled by 1/n: in [batch][n/2+1] complex -> out [batch][n].
    // The imaginary parts of bins 0 and n/2 are ignored (taken as zero), as
    // FFTW, NumPy and PyTorch do: a network's spectrum need not be exactly
    // that of a real signal.
    void irfft(Queue& q, int n, int batch, const DeviceBuffer& in, DeviceBuffer& out);
    // STFT framing: frames[f][i] = signal[f*hop + i] * window[i], i < n_fft, f < n_frames
    // (the signal must hold (n_frames-1)*hop + n_fft samples).
    void frame_signal(Queue& q, const DeviceBuffer& signal, int n_fft, int hop, int n_frames,
                      const DeviceBuffer& window, DeviceBuffer& frames);
    // Weighted overlap-add: out[t] = sum_f frames[f][t - f*hop] * window[t - f*hop] over the
    // frames covering t, for t < (n_frames-1)*hop + n_fft (out is overwritten, not accumulated).
    void overlap_add(Queue& q, const DeviceBuffer& frames, int n_fft, int hop, int n_frames,
                     const DeviceBuffer& window, DeviceBuffer& out);
    // Complex, element-wise over n complex values: c = a * b.
    void complex_multiply(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& c,
                          std::size_t n);
    // Complex exponential, element-wise over n complex values: y = exp(x).
    void complex_exp(Queue& q, const DeviceBuffer& x, DeviceBuffer& y, std::size_t n);
    // WaveNet's gated activation over `batch` items: x holds
    // [batch][2*channels][length] values; y [batch][channels][length] gets
    // y[i][c][t] = tanh(x[i][c][t]) * sigmoid(x[i][channels+c][t]) (VITS'
    // flow; a batch of its streams side by side is one call). x and y are
    // distinct buffers. The five-argument form is one item.
    void gated_tanh(Queue& q, int batch, int channels, int length, const DeviceBuffer& x,
                    DeviceBuffer& y);
    void gated_tanh(Queue& q, int channels, int length, const DeviceBuffer& x, DeviceBuffer& y) {
        gated_tanh(q, 1, channels, length, x, y);
    }
    // Real cepstrum -> minimum-phase cepstrum, per row of length n (batch rows):
    // y[0] = x[0], y[i] = 2 x[i] for 0 < i < n/2, y[n/2] = x[n/2], y[i] = 0 above.
    void minimum_phase_fold(Queue& q, int n, int batch, const DeviceBuffer& x, DeviceBuffer& y);
    // Softmax over each of `rows` rows of `cols` floats: y = exp(x - the row's
    // largest) / their sum. x and y may be the same buffer.
    void softmax_rows(Queue& q, int rows, int cols, const DeviceBuffer& x, DeviceBuffer& y);
    // Multi-head attention with relative positions (VITS' text encoder,
    // window `window`), its two products around the softmax, over `batch`
    // sentences padded to `length` positions. q, k, v and y are
    // [batch * length][heads * channels] (sentence b's position i at row
    // b*length + i, head h at columns h*channels ...), scores and p
    // [batch][heads][length][length], rel_k and rel_v [2*window + 1][channels]
    // (row r: the key `r - window` positions from the query, shared by the
    // heads). With the key mask ([batch * length]; may be empty: no pads), a
    // key whose mask is 0 scores -1e4 (Piper's masked_fill), which
    // softmax_rows makes exactly 0: a sentence's rows are what it gets alone.
    //   scores[b][h][i][j] = scale * (q_i . k_j + (|j-i| <= window ? q_i . rel_k[j-i+window] : 0))
    //   y[b*length + i][h*channels + c] = sum_j p[b][h][i][j] v[b*length + j][h*channels + c]
    //                          + sum_{|j-i| <= window} p[b][h][i][j] rel_v[j-i+window][c]
    // (dot products over head h's channels). The output is distinct from
    // every input.
    void relative_attention_scores(Queue& q, int batch, int heads, int length, int channels,
                                   int window, float scale, const DeviceBuffer& queries,
                                   const DeviceBuffer& keys, const DeviceBuffer& rel_k,
                                   const DeviceBuffer& key_mask, DeviceBuffer& scores);
    void relative_attention_values(Queue& q, int batch, int heads, int length, int channels,
                                   int window, const DeviceBuffer& p, const DeviceBuffer& values,
                                   const DeviceBuffer& rel_v, DeviceBuffer& y);
    // Broadcast product on a rows x cols matrix, in place (add_bias's
    // twin; a mask over time): per_row ? y[r][c] *= f[r] : y[r][c] *= f[c].
    void broadcast_multiply(Queue& q, int rows, int cols, const DeviceBuffer& factors, bool per_row,
                            DeviceBuffer& y);
    // The inverse of a monotonic rational-quadratic spline on [-bound, bound]
    // (identity outside), per element: VITS' stochastic duration predictor's
    // ConvFlow in reverse (Piper's transforms.py, linear tails, minimum bin
    // width, height and derivative 1e-3). y[i] = the inverse at x[i] of the
    // spline whose parameters are row i of params ([count][3*bins - 1]: bins
    // unnormalised widths and bins heights, both times `scale` before their
    // softmax, then the bins - 1 interior knots' unconstrained derivatives;
    // gpu/kernels/spline_bodies.h). x and y may be the same buffer; params
    // is distinct from y. bins 1 to 4096, bound finite and positive, scale finite.
    void spline_inverse(Queue& q, int count, int bins, float bound, float scale,
                        const DeviceBuffer& params, const DeviceBuffer& x, DeviceBuffer& y);

    // ---- recordings: record a step once, replay it many times ----
    // record() calls `body(q)` once; the operations it issues on `q` are
    // recorded, not run (on Vulkan into a command buffer that is kept, on
    // CUDA into a CUDA graph by stream capture; elsewhere into a log of the
    // calls). replay() queues all of them on `q` again, in order, as if the
    // body's calls were made there and then. The contract:
    // - Buffers: the recording refers to the allocations the body named.
    //   They must stay allocated (not freed, not given back to a pool) until
    //   the Recording dies; the DeviceBuffer objects themselves may move.
    //   What they hold is read when the replay runs: rewrite an input, replay,
    //   and the output follows the new input.
    // - Host values are frozen at record time: shapes, sizes, scalars
    //   (alpha, eps, fill values), the buffers chosen. A step of another shape
    //   needs its own recording.
    // - Host memory is not part of a recording: copy_to_device and
    //   copy_to_host inside the body throw std::invalid_argument, as do
    //   synchronize(), a nested record() and a replay(). Copy the inputs
    //   before replay() and the outputs after it, on the same queue.
    // - A recording replays only on the queue it was recorded on (which must
    //   outlive it: on CUDA the graph uses the queue's FFT plans and BLAS
    //   handle); another queue, another backend's queue or an empty
    //   recording throws std::invalid_argument. Replays are asynchronous and
    //   ordered with the queue's other work, like any operation.
    // - Errors: the body's argument errors reach the caller (nothing is kept).
    //   A device lost at replay (or at the synchronize after it) throws
    //   DeviceError and marks the backend failed, as any operation does, so
    //   the engine's CPU cover takes over. A replay counts as one operation
    //   for injected faults (GpuFault).
    // - Timings: commands inside a recording are not timed; while profiling,
    //   a native replay is timed as one "replay" entry.
    // A body that issues no operation throws std::invalid_argument.
    Recording record(Queue& q, const std::function<void(Queue&)>& body);
    void replay(Queue& q, const Recording& recording);

    // ---- health and profiling ----
    // Health and injected faults may be read and changed from any thread:
    // every stream on a device reports its failures here.
    Health health() const { return health_.load(); }
    std::string last_error() const {
        std::lock_guard lock(state_mu_);
        return last_error_;
    }
    void reset_health() {
        std::lock_guard lock(state_mu_);
        health_ = Health::Ok;
        last_error_.clear();
    }
    virtual std::vector<KernelTiming> kernel_timings() const = 0;
    virtual void reset_timings() = 0;
    // Whether operations are timed into kernel_timings(). Off by default:
    // timing brackets every operation (events on CUDA and OpenCL,
    // timestamp queries on Vulkan, a lock on the CPU), which a device
    // running many small operations pays for. Any thread; operations
    // started after the call follow it.
    void set_profiling(bool on) { profiling_.store(on, std::memory_order_relaxed); }
    bool profiling() const { return profiling_.load(std::memory_order_relaxed); }
    void inject_fault(GpuFault f) {
        std::lock_guard lock(state_mu_);
        fault_ = f;
        fault_armed_.store(f.kind != GpuFault::None && f.count > 0, std::memory_order_release);
    }

  protected:
    // What each backend implements: the operations above, with arguments
    // already checked by the public wrappers (gpu/backend_ops.cpp).
    virtual void copy_to_device_impl(Queue& q, DeviceBuffer& dst, std::size_t dst_offset_floats,
                                     const float* src, std::size_t floats) = 0;
    virtual void copy_to_host_impl(Queue& q, float* dst, const DeviceBuffer& src,
                                   std::size_t src_offset_floats, std::size_t floats) = 0;
    virtual void fill_impl(Queue& q, DeviceBuffer& dst, float value, std::size_t floats) = 0;
    virtual void activation_impl(Queue& q, Activation f, const DeviceBuffer& x, DeviceBuffer& y,
                                 std::size_t n, float alpha) = 0;
    virtual void gemm_impl(Queue& q, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                           const DeviceBuffer& a, int lda, const DeviceBuffer& b, int ldb,
                           float beta, DeviceBuffer& c, int ldc) = 0;
    virtual void conv1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                             const DeviceBuffer& w, const DeviceBuffer& bias, DeviceBuffer& y) = 0;
    virtual void conv_transpose1d_impl(Queue& q, const Conv1dShape& s, const DeviceBuffer& x,
                                       const DeviceBuffer& w, const DeviceBuffer& bias,
                                       DeviceBuffer& y) = 0;
    virtual void layer_norm_impl(Queue& q, int rows, int cols, float eps, const DeviceBuffer& x,
                                 const DeviceBuffer& gamma, const DeviceBuffer& beta,
                                 DeviceBuffer& y) = 0;
    virtual void axpby_impl(Queue& q, std::size_t n, float alpha, const DeviceBuffer& x, float beta,
                            DeviceBuffer& y) = 0;
    virtual void copy_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& src,
                                std::size_t src_offset, std::size_t src_stride, DeviceBuffer& dst,
                                std::size_t dst_offset, std::size_t dst_stride) = 0;
    // from_slots: src is the slots' buffer, dst the batch's; else the reverse.
    virtual void copy_slot_rows_impl(Queue& q, const SlotRows& s, const DeviceBuffer& index,
                                     bool from_slots, const DeviceBuffer& src,
                                     DeviceBuffer& dst) = 0;
    virtual void transpose_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                DeviceBuffer& y) = 0;
    virtual void add_bias_impl(Queue& q, int rows, int cols, const DeviceBuffer& bias, bool per_row,
                               DeviceBuffer& y) = 0;
    virtual void polar_spectrum_impl(Queue& q, int frames, int bins, float max_magnitude,
                                     const DeviceBuffer& x, DeviceBuffer& y) = 0;
    virtual void rfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                           DeviceBuffer& out) = 0;
    virtual void irfft_impl(Queue& q, int n, int batch, const DeviceBuffer& in,
                            DeviceBuffer& out) = 0;
    virtual void frame_signal_impl(Queue& q, const DeviceBuffer& signal, int n_fft, int hop,
                                   int n_frames, const DeviceBuffer& window,
                                   DeviceBuffer& frames) = 0;
    virtual void overlap_add_impl(Queue& q, const DeviceBuffer& frames, int n_fft, int hop,
                                  int n_frames, const DeviceBuffer& window, DeviceBuffer& out) = 0;
    virtual void complex_multiply_impl(Queue& q, const DeviceBuffer& a, const DeviceBuffer& b,
                                       DeviceBuffer& c, std::size_t n) = 0;
    virtual void complex_exp_impl(Queue& q, const DeviceBuffer& x, DeviceBuffer& y,
                                  std::size_t n) = 0;
    virtual void minimum_phase_fold_impl(Queue& q, int n, int batch, const DeviceBuffer& x,
                                         DeviceBuffer& y) = 0;
    virtual void gated_tanh_impl(Queue& q, int batch, int channels, int length,
                                 const DeviceBuffer& x, DeviceBuffer& y) = 0;
    virtual void softmax_rows_impl(Queue& q, int rows, int cols, const DeviceBuffer& x,
                                   DeviceBuffer& y) = 0;
    virtual void relative_attention_scores_impl(Queue& q, int batch, int heads, int length,
                                                int channels, int window, float scale,
                                                const DeviceBuffer& queries,
                                                const DeviceBuffer& keys, const DeviceBuffer& rel_k,
                                                const DeviceBuffer& key_mask,
                                                DeviceBuffer& scores) = 0;
    virtual void relative_attention_values_impl(Queue& q, int batch, int heads, int length,
                                                int channels, int window, const DeviceBuffer& p,
                                                const DeviceBuffer& values,
                                                const DeviceBuffer& rel_v, DeviceBuffer& y) = 0;
    virtual void broadcast_multiply_impl(Queue& q, int rows, int cols, const DeviceBuffer& factors,
                                         bool per_row, DeviceBuffer& y) = 0;
    virtual void spline_inverse_impl(Queue& q, int count, int bins, float bound, float scale,
                                     const DeviceBuffer& params, const DeviceBuffer& x,
                                     DeviceBuffer& y) = 0;

    // Native recordings. The defaults (CPU, OpenCL) have none: record() then
    // keeps the fallback's log of calls. begin returns whether this backend
    // records `q` natively (it may throw std::invalid_argument for a queue
    // of another backend); end turns what was recorded since into
    // RecordedWork; abort drops it (the body threw); replay_impl queues it.
    virtual bool begin_recording_impl(Queue&) { return false; }
    virtual std::shared_ptr<RecordedWork> end_recording_impl(Queue&) { return nullptr; }
    virtual void abort_recording_impl(Queue&) noexcept {}
    virtual void replay_impl(Queue&, const std::shared_ptr<RecordedWork>&) {}
    // For the backends' synchronize(): std::invalid_argument while `q` records.
    static void refuse_while_recording(const Queue& q, const char* op);

    // Backends call this before each operation: applies an injected fault.
    // Returns the delay to add (ms) for a Late fault; throws for the others.
    double consume_fault(const char* op);
    void mark_failed(const std::string& what) {
        std::lock_guard lock(state_mu_);
        health_ = Health::Failed;
        last_error_ = what;
    }

  private:
    // Runs `call(q)` (an operation's *_impl with its checked arguments), or,
    // while the fallback records `q`, logs it to run at replay; counts it
    // while `q` records either way (backend_ops.cpp).
    template <class Call>
    void issue(Queue& q, Call&& call);

    mutable std::mutex state_mu_;  // last_error_ and fault_
    std::atomic<Health> health_{Health::Ok};
    std::atomic<bool> profiling_{false};
    std::string last_error_;
    GpuFault fault_;
    // Whether fault_ may still fire: every operation of every stream on the
    // device asks, so the answer without a fault (always, outside drills
    // and tests) is one load, not the backend's lock taken by every host
    // thread issuing work.
    std::atomic<bool> fault_armed_{false};
};

}  // namespace etude::gpu
