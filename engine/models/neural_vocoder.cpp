#include "engine/models/neural_vocoder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "engine/error.h"
#include "engine/models/stream_layers.h"
#include "gpu/registry.h"

namespace etude::engine {
namespace {

using Json = nlohmann::json;
using Shape = std::vector<std::uint64_t>;

constexpr const char* kWeightsTag = "model weights";
constexpr const char* kWorkTag = "vocoder workspace";
// Frames per network evaluation at most: bounds device memory for long
// inputs (HiFi-GAN V1 needs about 32 KiB per frame in each work buffer).
constexpr int kMaxFramesPerRun = 512;

// ---- metadata -------------------------------------------------------------

class Metadata {
  public:
    Metadata(const std::string& text, std::string label) : label_(std::move(label)) {
        json_ = Json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (!json_.is_object()) fail("metadata", "is not a JSON object");
    }
    const Json& root() const { return json_; }
    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw Error(label_ + ": " + field + " " + what);
    }
    const Json& at(const Json& obj, const char* key, const std::string& path) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(path + key, "is missing from the metadata");
        return *it;
    }
    int integer(const Json& obj, const char* key, int lo, int hi,
                const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_number_integer()) fail(path + key, "must be an integer");
        const auto x = v.get<long long>();
        if (x < lo || x > hi)
            fail(path + key, "is " + std::to_string(x) + ", expected " + std::to_string(lo) + ".." +
                                 std::to_string(hi));
        return static_cast<int>(x);
    }
    double number(const Json& obj, const char* key, const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_number()) fail(path + key, "must be a number");
        const double x = v.get<double>();
        if (!std::isfinite(x)) fail(path + key, "must be finite");
        return x;
    }
    std::string text(const Json& obj, const char* key, std::initializer_list<const char*> allowed,
                     const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_string()) fail(path + key, "must be a string");
        const auto s = v.get<std::string>();
        std::string list;
        for (const char* a : allowed) {
            if (s == a) return s;
            list += (list.empty() ? "" : ", ") + std::string(a);
        }
        fail(path + key, "is '" + s + "', expected one of: " + list);
    }
    std::vector<int> integers(const Json& obj, const char* key, int lo, int hi,
                              const std::string& path = "") const {
        const Json& v = at(obj, key, path);
        if (!v.is_array() || v.empty() || v.size() > 16)
            fail(path + key, "must be a list of 1..16 integers");
        std::vector<int> out;
        for (const auto& e : v) {
            if (!e.is_number_integer()) fail(path + key, "must hold integers only");
            const auto x = e.get<long long>();
            if (x < lo || x > hi)
                fail(path + key, "holds " + std::to_string(x) + ", expected " + std::to_string(lo) +
                                     ".." + std::to_string(hi));
            out.push_back(static_cast<int>(x));
        }
        return out;
    }

  private:
    Json json_;
    std::string label_;
};

ModelAudioParams read_audio_params(const Metadata& m) {
    const Json& r = m.root();
    ModelAudioParams a;
    a.architecture = m.text(r, "architecture", {"hifigan", "vocos"});
    a.sample_rate = m.integer(r, "sample_rate", 8000, 192000);
    a.n_fft = m.integer(r, "n_fft", 16, 1 << 16);
    a.hop = m.integer(r, "hop", 1, a.n_fft);
    a.win_length = m.integer(r, "win_length", 1, a.n_fft);
    m.text(r, "window", {"hann"});
    a.n_mels = m.integer(r, "n_mels", 1, 512);
    a.fmin = m.number(r, "fmin");
    a.fmax = m.number(r, "fmax");
    if (a.fmin < 0 || a.fmax <= a.fmin || a.fmax > a.sample_rate / 2.0 + 1e-6)
        m.fail("fmin/fmax", "must satisfy 0 <= fmin < fmax <= sample_rate/2");
    a.mel_scale = m.text(r, "mel_scale", {"slaney", "htk"});
    a.mel_norm = m.text(r, "mel_norm", {"slaney", "none"});
    a.mel_power = m.number(r, "mel_power");
    if (a.mel_power != 1.0 && a.mel_power != 2.0) m.fail("mel_power", "must be 1 or 2");
    a.log_floor = m.number(r, "log_floor");
    if (!(a.log_floor > 0)) m.fail("log_floor", "must be positive");
    a.magnitude_eps = m.number(r, "magnitude_eps");
    if (a.magnitude_eps < 0) m.fail("magnitude_eps", "must not be negative");
    a.padding = m.text(r, "padding", {"reflect_half", "center"});
    return a;
}

// ---- weights on the device --------------------------------------------------

struct DeviceTensor {
    gpu::DeviceBuffer buffer;
    Shape shape;
};

class WeightLoader {
  public:
    WeightLoader(const LefFile& file, gpu::Backend& backend, gpu::Queue& queue)
        : file_(file), backend_(backend), queue_(queue) {}
    DeviceTensor load(const std::string& name, const Shape& shape) {
        auto values = file_.floats(name, shape);  // checks the shape
        return upload(std::move(values), shape);
    }
    std::vector<float> host(const std::string& name, const Shape& shape) const {
        return file_.floats(name, shape);
    }
    DeviceTensor upload(std::vector<float> values, Shape shape) {
        staged_.push_back(std::move(values));
        const auto& v = staged_.back();
        DeviceTensor t{backend_.allocate(v.size(), kWeightsTag), std::move(shape)};
        backend_.copy_to_device(queue_, t.buffer, 0, v.data(), v.size());
        return t;
    }
    const LefFile& file() const { return file_; }
    void finish() {
        backend_.synchronize(queue_);
        staged_.clear();
    }

  private:
    const LefFile& file_;
    gpu::Backend& backend_;
    gpu::Queue& queue_;
    std::vector<std::vector<float>> staged_;  // host copies alive until the copies land
};

// Device scratch buffers, grown on demand and kept between runs.
class Workspace {
  public:
    static constexpr std::size_t kSlots = 8;
    explicit Workspace(gpu::Backend& backend) : backend_(backend) {}
    // References stay valid across calls (fixed slots), so a run can hold several.
    gpu::DeviceBuffer& get(std::size_t slot, std::size_t floats) {
        auto& b = buffers_.at(slot);
        if (b.floats() < floats) {
            b = gpu::DeviceBuffer();
            b = backend_.allocate(floats + floats / 4, kWorkTag);
        }
        return b;
    }

  private:
    gpu::Backend& backend_;
    std::array<gpu::DeviceBuffer, kSlots> buffers_;
};

std::string idx(const char* prefix, std::size_t i, const char* suffix = "") {
    return std::string(prefix) + std::to_string(i) + suffix;
}

long floor_div(long a, long b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}
long ceil_div(long a, long b) {
    return -floor_div(-a, b);
}

// Tracks how far each layer's input must reach for one output frame, so the
// streaming window carries exactly the context the receptive field needs.
// Intervals are [lo, hi) in the layer's own samples; `rate` is samples per
// mel frame at that layer.
class ReceptiveField {
  public:
    struct Interval {
        long lo, hi;
    };
    void require(Interval in, long rate) {
        left_ = std::max<long>(left_, ceil_div(-in.lo, rate));
        right_ = std::max<long>(right_, ceil_div(in.hi, rate) - 1);
    }
    // Stride-1 convolution with `padding`: output [lo, hi) reads this input.
    static Interval through_conv(Interval out, long kernel, long dilation, long padding) {
        return {out.lo - padding, out.hi - padding + (kernel - 1) * dilation};
    }
    static Interval through_transpose(Interval out, long kernel, long stride, long padding) {
        return {ceil_div(out.lo + padding - (kernel - 1), stride),
                floor_div(out.hi - 1 + padding, stride) + 1};
    }
    int left() const { return static_cast<int>(left_); }
    int right() const { return static_cast<int>(right_); }

  private:
    long left_ = 0, right_ = 0;
};

// ---- HiFi-GAN -----------------------------------------------------------------

struct ConvLayer {
    DeviceTensor weight, bias;
    gpu::Conv1dShape shape;  // in_length and batch filled per run
};

class HifiGanNetwork final : public VocoderNetwork {
  public:
    HifiGanNetwork(const Metadata& meta, const ModelAudioParams& audio, WeightLoader& loader,
                   gpu::Backend& backend, int& left, int& right)
        : backend_(backend), work_(backend), n_mels_(audio.n_mels) {
        const Json& h = meta.at(meta.root(), "hyperparameters", "");
        const std::string p = "hyperparameters.";
        const int kind = meta.integer(h, "resblock", 1, 2, p);
        rates_ = meta.integers(h, "upsample_rates", 1, 64, p);
        const auto up_kernels = meta.integers(h, "upsample_kernel_sizes", 1, 256, p);
        const int ch0 = meta.integer(h, "upsample_initial_channel", 1, 4096, p);
        const auto rb_kernels = meta.integers(h, "resblock_kernel_sizes", 1, 63, p);
        const Json& dil = meta.at(h, "resblock_dilation_sizes", p);
        slope_ = static_cast<float>(meta.number(h, "leaky_relu_slope", p));
        final_slope_ = static_cast<float>(meta.number(h, "final_leaky_relu_slope", p));
        const int pre_k = meta.integer(h, "conv_pre_kernel", 1, 63, p);
        const int post_k = meta.integer(h, "conv_post_kernel", 1, 63, p);
        if (up_kernels.size() != rates_.size())
            meta.fail(p + "upsample_kernel_sizes", "must have one entry per upsample rate");
        if (!dil.is_array() || dil.size() != rb_kernels.size())
            meta.fail(p + "resblock_dilation_sizes", "must have one list per resblock kernel");
        if (pre_k % 2 == 0 || post_k % 2 == 0) meta.fail(p + "conv_pre_kernel", "must be odd");
        long total = 1;
        for (std::size_t i = 0; i < rates_.size(); ++i) {
            if ((up_kernels[i] - rates_[i]) % 2 != 0 || up_kernels[i] < rates_[i])
                meta.fail(p + "upsample_kernel_sizes",
                          "must exceed each rate by an even amount (output length = input x rate)");
            total *= rates_[i];
        }
        if (total != audio.hop)
            meta.fail(p + "upsample_rates", "multiply to " + std::to_string(total) +
                                                ", but hop is " + std::to_string(audio.hop));
        if ((ch0 >> rates_.size()) < 1)
            meta.fail(p + "upsample_initial_channel", "is too small for the number of upsamples");
        std::vector<std::vector<int>> dilations;
        for (std::size_t j = 0; j < dil.size(); ++j) {
            const auto key = "resblock_dilation_sizes[" + std::to_string(j) + "]";
            Json wrap = {{"d", dil[j]}};
            auto d = meta.integers(wrap, "d", 1, 64, p + key);
            if (kind == 1 && d.size() != 3)
                meta.fail(p + key, "must hold 3 dilations for resblock 1");
            if (kind == 2 && d.size() != 2)
                meta.fail(p + key, "must hold 2 dilations for resblock 2");
            if (rb_kernels[j] % 2 == 0) meta.fail(p + "resblock_kernel_sizes", "must be odd");
            dilations.push_back(std::move(d));
        }
        num_kernels_ = static_cast<int>(rb_kernels.size());

        // Weights as PyTorch holds them: Conv1d [out][in][k], ConvTranspose1d [in][out][k].
        auto layer = [&](const std::string& name, int in, int out, int k, int stride, int d,
                         int pad, bool transposed) {
            const auto o = Shape::value_type(out), i = Shape::value_type(in);
            ConvLayer c;
            c.weight = loader.load(name + ".weight",
                                   {transposed ? i : o, transposed ? o : i, Shape::value_type(k)});
            c.bias = loader.load(name + ".bias", {o});
            c.shape.in_channels = in;
            c.shape.out_channels = out;
            c.shape.kernel = k;
            c.shape.stride = stride;
            c.shape.dilation = d;
            c.shape.padding = pad;
            return c;
        };
        auto conv = [&](const std::string& name, int in, int out, int k, int d, int pad) {
            return layer(name, in, out, k, 1, d, pad, false);
        };
        conv_pre_ = conv("conv_pre", audio.n_mels, ch0, pre_k, 1, (pre_k - 1) / 2);
        int ch = ch0;
        for (std::size_t i = 0; i < rates_.size(); ++i) {
            const int out = ch / 2, k = up_kernels[i], u = rates_[i];
            ups_.push_back(layer(idx("ups.", i), ch, out, k, u, 1, (k - u) / 2, true));
            ch = out;
            for (int j = 0; j < num_kernels_; ++j) {
                ResBlock rb;
                const auto base = idx("resblocks.", i * num_kernels_ + j, ".");
                const int k2 = rb_kernels[j];
                for (std::size_t m = 0; m < dilations[j].size(); ++m) {
                    const int d = dilations[j][m];
                    if (kind == 1) {
                        rb.first.push_back(
                            conv(base + idx("convs1.", m), ch, ch, k2, d, (k2 * d - d) / 2));
                        rb.second.push_back(
                            conv(base + idx("convs2.", m), ch, ch, k2, 1, (k2 - 1) / 2));
                    } else {
                        rb.first.push_back(
                            conv(base + idx("convs.", m), ch, ch, k2, d, (k2 * d - d) / 2));
                    }
                }
                resblocks_.push_back(std::move(rb));
            }
        }
        conv_post_ = conv("conv_post", ch, 1, post_k, 1, (post_k - 1) / 2);
        final_channels_ = ch;

        // Receptive field, walked from one output frame back to the mel.
        ReceptiveField rf;
        long rate = total;
        ReceptiveField::Interval iv{0, rate};
        iv = ReceptiveField::through_conv(iv, post_k, 1, (post_k - 1) / 2);
        rf.require(iv, rate);
        for (std::size_t i = rates_.size(); i-- > 0;) {
            ReceptiveField::Interval widest = iv;
            for (int j = 0; j < num_kernels_; ++j) {
                const auto& rb = resblocks_[i * num_kernels_ + j];
                ReceptiveField::Interval r = iv;
                for (std::size_t m = rb.first.size(); m-- > 0;) {
                    if (!rb.second.empty()) {
                        const auto& s2 = rb.second[m].shape;
                        r = ReceptiveField::through_conv(r, s2.kernel, s2.dilation, s2.padding);
                        rf.require(r, rate);
                    }
                    const auto& s1 = rb.first[m].shape;
                    r = ReceptiveField::through_conv(r, s1.kernel, s1.dilation, s1.padding);
                    rf.require(r, rate);
                }
                widest = {std::min(widest.lo, r.lo), std::max(widest.hi, r.hi)};
            }
            const auto& us = ups_[i].shape;
            iv = ReceptiveField::through_transpose(widest, us.kernel, us.stride, us.padding);
            rate /= us.stride;
            rf.require(iv, rate);
        }
        iv = ReceptiveField::through_conv(iv, pre_k, 1, (pre_k - 1) / 2);
        rf.require(iv, 1);
        left = rf.left();
        right = rf.right();
        hop_ = audio.hop;
        queue_ = backend_.create_queue();
    }

    int values_per_frame() const override { return hop_; }
    std::unique_ptr<NetworkStream> open_stream(int right_context) const override;

    void run(const float* mel, int frames, int first, int count, float* out) override {
        gpu::Queue& q = *queue_;
        std::size_t widest = static_cast<std::size_t>(conv_pre_.shape.out_channels) * frames;
        {
            std::size_t ch = conv_pre_.shape.out_channels, len = frames;
            for (int u : rates_) {
                ch /= 2;
                len *= u;
                widest = std::max(widest, ch * len);
            }
        }
        auto& in = work_.get(0, static_cast<std::size_t>(n_mels_) * frames);
        gpu::DeviceBuffer* x = &work_.get(1, widest);
        gpu::DeviceBuffer* y = &work_.get(2, widest);
        auto& r = work_.get(3, widest);
        auto& t1 = work_.get(4, widest);
        auto& t2 = work_.get(5, widest);
        backend_.copy_to_device(q, in, 0, mel, static_cast<std::size_t>(n_mels_) * frames);

        int len = frames;
        apply(q, conv_pre_, in, *x, len, false);
        for (std::size_t i = 0; i < ups_.size(); ++i) {
            const int ch = ups_[i].shape.in_channels;
            backend_.activation(q, gpu::Activation::LeakyRelu, *x, *x,
                                static_cast<std::size_t>(ch) * len, slope_);
            apply(q, ups_[i], *x, *y, len, true);
            len *= rates_[i];
            const std::size_t n = static_cast<std::size_t>(ups_[i].shape.out_channels) * len;
            // y holds the upsampled signal; x collects the resblock sum.
            for (int j = 0; j < num_kernels_; ++j) {
                const auto& rb = resblocks_[i * num_kernels_ + j];
                backend_.axpby(q, n, 1.0f, *y, 0.0f, r);
                for (std::size_t m = 0; m < rb.first.size(); ++m) {
                    // ResBlock1: r += c2(lrelu(c1(lrelu(r)))); ResBlock2: r += c1(lrelu(r)).
                    backend_.activation(q, gpu::Activation::LeakyRelu, r, t1, n, slope_);
                    apply(q, rb.first[m], t1, t2, len, false);
                    const gpu::DeviceBuffer* branch = &t2;
                    if (!rb.second.empty()) {
                        backend_.activation(q, gpu::Activation::LeakyRelu, t2, t2, n, slope_);
                        apply(q, rb.second[m], t2, t1, len, false);
                        branch = &t1;
                    }
                    backend_.axpby(q, n, 1.0f, *branch, 1.0f, r);
                }
                backend_.axpby(q, n, 1.0f, r, j == 0 ? 0.0f : 1.0f, *x);
            }
            backend_.axpby(q, n, 1.0f / static_cast<float>(num_kernels_), *x, 0.0f, *x);
        }
        const std::size_t n = static_cast<std::size_t>(final_channels_) * len;
        backend_.activation(q, gpu::Activation::LeakyRelu, *x, *x, n, final_slope_);
        apply(q, conv_post_, *x, *y, len, false);
        backend_.activation(q, gpu::Activation::Tanh, *y, *y, static_cast<std::size_t>(len));
        backend_.copy_to_host(q, out, *y, static_cast<std::size_t>(first) * hop_,
                              static_cast<std::size_t>(count) * hop_);
        backend_.synchronize(q);
    }

  private:
    friend class HifiGanStream;
    struct ResBlock {
        std::vector<ConvLayer> first, second;  // ResBlock2 has no second convs
    };
    void apply(gpu::Queue& q, const ConvLayer& c, const gpu::DeviceBuffer& in,
               gpu::DeviceBuffer& out, int len, bool transpose) {
        gpu::Conv1dShape s = c.shape;
        s.batch = 1;
        s.in_length = len;
        if (transpose)
            backend_.conv_transpose1d(q, s, in, c.weight.buffer, c.bias.buffer, out);
        else
            backend_.conv1d(q, s, in, c.weight.buffer, c.bias.buffer, out);
    }

    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    Workspace work_;
    int n_mels_ = 0, hop_ = 0, num_kernels_ = 0, final_channels_ = 0;
    float slope_ = 0.1f, final_slope_ = 0.01f;
    std::vector<int> rates_;
    ConvLayer conv_pre_, conv_post_;
    std::vector<ConvLayer> ups_;
    std::vector<ResBlock> resblocks_;
};

// ---- Vocos --------------------------------------------------------------------

class VocosNetwork final : public VocoderNetwork {
  public:
    VocosNetwork(const Metadata& meta, const ModelAudioParams& audio, WeightLoader& loader,
                 gpu::Backend& backend, int& left, int& right, std::vector<float>& window)
        : backend_(backend), work_(backend), n_mels_(audio.n_mels) {
        const Json& h = meta.at(meta.root(), "hyperparameters", "");
        const std::string p = "hyperparameters.";
        dim_ = meta.integer(h, "dim", 1, 8192, p);
        inter_ = meta.integer(h, "intermediate_dim", 1, 65536, p);
        layers_ = meta.integer(h, "num_layers", 0, 256, p);
        eps_ = static_cast<float>(meta.number(h, "layer_norm_eps", p));
        n_fft_ = meta.integer(h, "head_n_fft", 16, 1 << 16, p);
        hop_ = meta.integer(h, "head_hop", 1, n_fft_, p);
        meta.text(h, "head_padding", {"center"}, p);
        max_mag_ = static_cast<float>(meta.number(h, "max_magnitude", p));
        if (n_fft_ % 2 != 0) meta.fail(p + "head_n_fft", "must be even");
        if (hop_ != audio.hop) meta.fail(p + "head_hop", "must equal hop");
        const auto D = Shape::value_type(dim_), I = Shape::value_type(inter_);

        const auto* embed = loader.file().find("backbone.embed.weight");
        if (!embed || embed->shape.size() != 3)
            meta.fail("tensor backbone.embed.weight", "is missing or not 3-D");
        const int ek = static_cast<int>(embed->shape[2]);
        if (ek % 2 == 0 || ek > 63) meta.fail("tensor backbone.embed.weight", "kernel must be odd");
        embed_.weight = loader.load("backbone.embed.weight",
                                    {D, Shape::value_type(n_mels_), Shape::value_type(ek)});
        embed_.bias = loader.load("backbone.embed.bias", {D});
        embed_.shape.in_channels = n_mels_;
        embed_.shape.out_channels = dim_;
        embed_.shape.kernel = ek;
        embed_.shape.padding = ek / 2;
        norm_w_ = loader.load("backbone.norm.weight", {D});
        norm_b_ = loader.load("backbone.norm.bias", {D});
        int context = ek / 2;
        for (int i = 0; i < layers_; ++i) {
            const auto b = idx("backbone.convnext.", i, ".");
            Block blk;
            const auto* dw = loader.file().find(b + "dwconv.weight");
            if (!dw || dw->shape.size() != 3)
                meta.fail("tensor " + b + "dwconv.weight", "is missing or not 3-D");
            const int k = static_cast<int>(dw->shape[2]);
            if (k % 2 == 0 || k > 63)
                meta.fail("tensor " + b + "dwconv.weight", "kernel must be odd");
            blk.dw.weight = loader.load(b + "dwconv.weight", {D, 1, Shape::value_type(k)});
            blk.dw.bias = loader.load(b + "dwconv.bias", {D});
            blk.dw.shape.in_channels = blk.dw.shape.out_channels = blk.dw.shape.groups = dim_;
            blk.dw.shape.kernel = k;
            blk.dw.shape.padding = k / 2;
            context += k / 2;
            blk.norm_w = loader.load(b + "norm.weight", {D});
            blk.norm_b = loader.load(b + "norm.bias", {D});
            blk.pw1_w = loader.load(b + "pwconv1.weight", {I, D});
            blk.pw1_b = loader.load(b + "pwconv1.bias", {I});
            // Layer scale folded into the second linear layer:
            // gamma * (W x + b) = (gamma W) x + gamma b.
            const auto gamma = loader.host(b + "gamma", {D});
            auto w2 = loader.host(b + "pwconv2.weight", {D, I});
            auto b2 = loader.host(b + "pwconv2.bias", {D});
            for (int c = 0; c < dim_; ++c) {
                for (int j = 0; j < inter_; ++j)
                    w2[static_cast<std::size_t>(c) * inter_ + j] *= gamma[c];
                b2[c] *= gamma[c];
            }
            blk.pw2_w = loader.upload(std::move(w2), {D, I});
            blk.pw2_b = loader.upload(std::move(b2), {D});
            blocks_.push_back(std::move(blk));
        }
        final_w_ = loader.load("backbone.final_layer_norm.weight", {D});
        final_b_ = loader.load("backbone.final_layer_norm.bias", {D});
        const auto out_dim = Shape::value_type(n_fft_ + 2);
        head_w_ = loader.load("head.out.weight", {out_dim, D});
        head_b_ = loader.load("head.out.bias", {out_dim});
        if (loader.file().find("head.istft.window"))
            window = loader.host("head.istft.window", {Shape::value_type(n_fft_)});
        else {
            window.resize(n_fft_);
            for (int i = 0; i < n_fft_; ++i)
                window[i] =
                    static_cast<float>(0.5 - 0.5 * std::cos(2 * std::numbers::pi * i / n_fft_));
        }
        left = right = context;
        queue_ = backend_.create_queue();
    }

    int values_per_frame() const override { return n_fft_; }
    std::unique_ptr<NetworkStream> open_stream(int right_context) const override;

    void run(const float* mel, int frames, int first, int count, float* out) override {
        gpu::Queue& q = *queue_;
        const std::size_t T = static_cast<std::size_t>(frames);
        const int bins = n_fft_ / 2 + 1;
        auto& in = work_.get(0, static_cast<std::size_t>(n_mels_) * T);
        auto& x = work_.get(1, dim_ * T);   // [dim][T], the residual stream
        auto& h = work_.get(2, dim_ * T);   // [dim][T]
        auto& ht = work_.get(3, dim_ * T);  // [T][dim]
        auto& hn = work_.get(4, dim_ * T);  // [T][dim]
        auto& u = work_.get(5, std::max<std::size_t>(inter_, n_fft_ + 2) * T);  // [T][inter]
        auto& spec = work_.get(6, 2 * static_cast<std::size_t>(bins) * T);
        auto& frames_out = work_.get(7, static_cast<std::size_t>(n_fft_) * T);
        backend_.copy_to_device(q, in, 0, mel, static_cast<std::size_t>(n_mels_) * T);

        gpu::Conv1dShape es = embed_.shape;
        es.in_length = frames;
        backend_.conv1d(q, es, in, embed_.weight.buffer, embed_.bias.buffer, h);
        // LayerNorm over channels, per frame: work in [T][dim].
        backend_.transpose(q, dim_, frames, h, ht);
        backend_.layer_norm(q, frames, dim_, eps_, ht, norm_w_.buffer, norm_b_.buffer, hn);
        backend_.transpose(q, frames, dim_, hn, x);
        for (const auto& blk : blocks_) {
            gpu::Conv1dShape ds = blk.dw.shape;
            ds.in_length = frames;
            backend_.conv1d(q, ds, x, blk.dw.weight.buffer, blk.dw.bias.buffer, h);
            backend_.transpose(q, dim_, frames, h, ht);
            backend_.layer_norm(q, frames, dim_, eps_, ht, blk.norm_w.buffer, blk.norm_b.buffer,
                                hn);
            // u[T][inter] = hn[T][dim] * W1^T + b1
            backend_.gemm(q, false, true, frames, inter_, dim_, 1.0f, hn, dim_, blk.pw1_w.buffer,
                          dim_, 0.0f, u, inter_);
            backend_.add_bias(q, frames, inter_, blk.pw1_b.buffer, false, u);
            backend_.activation(q, gpu::Activation::Gelu, u, u,
                                static_cast<std::size_t>(inter_) * T);
            // x[dim][T] += (gamma W2)[dim][inter] * u^T + gamma b2
            backend_.gemm(q, false, true, dim_, frames, inter_, 1.0f, blk.pw2_w.buffer, inter_, u,
                          inter_, 1.0f, x, frames);
            backend_.add_bias(q, dim_, frames, blk.pw2_b.buffer, true, x);
        }
        backend_.transpose(q, dim_, frames, x, ht);
        backend_.layer_norm(q, frames, dim_, eps_, ht, final_w_.buffer, final_b_.buffer, hn);
        // Head: [T][n_fft+2] = hn * Wout^T + b, then polar -> complex -> inverse FFT.
        backend_.gemm(q, false, true, frames, n_fft_ + 2, dim_, 1.0f, hn, dim_, head_w_.buffer,
                      dim_, 0.0f, u, n_fft_ + 2);
        backend_.add_bias(q, frames, n_fft_ + 2, head_b_.buffer, false, u);
        backend_.polar_spectrum(q, frames, bins, max_mag_, u, spec);
        backend_.irfft(q, n_fft_, frames, spec, frames_out);
        backend_.copy_to_host(q, out, frames_out, static_cast<std::size_t>(first) * n_fft_,
                              static_cast<std::size_t>(count) * n_fft_);
        backend_.synchronize(q);
    }

  private:
    friend class VocosStream;
    struct Block {
        ConvLayer dw;
        DeviceTensor norm_w, norm_b, pw1_w, pw1_b, pw2_w, pw2_b;
    };
    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    Workspace work_;
    int n_mels_ = 0, dim_ = 0, inter_ = 0, layers_ = 0, n_fft_ = 0, hop_ = 0;
    float eps_ = 1e-6f, max_mag_ = 100.0f;
    ConvLayer embed_;
    DeviceTensor norm_w_, norm_b_, final_w_, final_b_, head_w_, head_b_;
    std::vector<Block> blocks_;
};

// ---- incremental runners ------------------------------------------------------------

// HiFi-GAN, layer by layer as HifiGanNetwork::run, each layer a stream layer:
// the residual paths are delayed by their branch's lag, and the resblocks of
// a stage by the difference to the slowest one, so every sum lines up.
class HifiGanStream final : public NetworkStream {
  public:
    explicit HifiGanStream(const HifiGanNetwork& net)
        : net_(net), backend_(net.backend_), queue_(backend_.create_queue()) {
        // Outputs that are never needed at the same time share a buffer
        // (see push()): every conv writes `conv_out_` and is read at once by
        // the next layer or the residual sum; the residual path of a
        // resblock alternates between two buffers, a delay reading one and
        // writing the other.
        pre_ = conv(net.conv_pre_, std::nullopt, conv_out_);
        for (std::size_t i = 0; i < net.ups_.size(); ++i) {
            Stage st;
            st.up = std::make_unique<StreamUpsample>(
                backend_, *queue_, net.ups_[i].shape, net.ups_[i].weight.buffer,
                net.ups_[i].bias.buffer, net.slope_, scratch_, up_out_);
            st.channels = net.ups_[i].shape.out_channels;
            std::vector<int> lags;
            for (int j = 0; j < net.num_kernels_; ++j) {
                const auto& rb = net.resblocks_[i * net.num_kernels_ + j];
                Branch br;
                int lag = 0;
                for (std::size_t m = 0; m < rb.first.size(); ++m) {
                    Sub sub;
                    sub.c1 = conv(rb.first[m], net.slope_, conv_out_);
                    int sub_lag = rb.first[m].shape.padding;
                    if (!rb.second.empty()) {
                        sub.c2 = conv(rb.second[m], net.slope_, conv_out_);
                        sub_lag += rb.second[m].shape.padding;
                    }
                    sub.skip = std::make_unique<StreamDelay>(backend_, *queue_, st.channels,
                                                             sub_lag, residual_[m % 2]);
                    lag += sub_lag;
                    br.subs.push_back(std::move(sub));
                }
                lags.push_back(lag);
                st.branches.push_back(std::move(br));
            }
            const int slowest = lags.empty() ? 0 : *std::max_element(lags.begin(), lags.end());
            for (std::size_t j = 0; j < st.branches.size(); ++j) {
                // The last residual sits in residual_[(subs - 1) % 2]; the
                // aligned copy goes to the other one.
                const std::size_t subs = st.branches[j].subs.size();
                st.branches[j].align = std::make_unique<StreamDelay>(
                    backend_, *queue_, st.channels, slowest - lags[j], residual_[subs % 2]);
            }
            st.lag = slowest;
            stages_.push_back(std::move(st));
        }
        post_ = conv(net.conv_post_, net.final_slope_, conv_out_);
    }

    // The lag of the whole network in output samples: what must be within the
    // right context the stream waits for.
    long lag_samples() const {
        long total = 1;
        for (int u : net_.rates_) total *= u;
        long lag = static_cast<long>(net_.conv_pre_.shape.padding) * total;
        long rate = 1;
        for (std::size_t i = 0; i < stages_.size(); ++i) {
            rate *= net_.rates_[i];
            lag += static_cast<long>(net_.ups_[i].shape.padding + stages_[i].lag) * (total / rate);
        }
        return lag + net_.conv_post_.shape.padding;
    }

    static bool supports(const HifiGanNetwork& net) {
        if (!StreamConv::supports(net.conv_pre_.shape) ||
            !StreamConv::supports(net.conv_post_.shape))
            return false;
        for (const auto& u : net.ups_)
            if (!StreamUpsample::supports(u.shape)) return false;
        for (const auto& rb : net.resblocks_) {
            for (const auto& c : rb.first)
                if (!StreamConv::supports(c.shape)) return false;
            for (const auto& c : rb.second)
                if (!StreamConv::supports(c.shape)) return false;
        }
        return true;
    }

    void reset() override {
        pre_->reset();
        post_->reset();
        for (auto& st : stages_) {
            st.up->reset();
            for (auto& br : st.branches) {
                for (auto& sub : br.subs) {
                    sub.c1->reset();
                    if (sub.c2) sub.c2->reset();
                    sub.skip->reset();
                }
                br.align->reset();
            }
        }
    }

    void push(const float* mel, int frames, bool flush, std::vector<float>& values) override {
        gpu::Queue& q = *queue_;
        const std::size_t n_in = static_cast<std::size_t>(net_.n_mels_) * std::max(frames, 0);
        auto& in = mel_.need(backend_, n_in);
        if (n_in > 0) backend_.copy_to_device(q, in, 0, mel, n_in);
        SignalRef x = pre_->push(q, {&in, net_.n_mels_, frames}, flush);
        for (auto& st : stages_) {
            const SignalRef y = st.up->push(q, x, flush);
            // Every resblock, lined up, completes the same samples.
            int length = -1;
            std::size_t n = 0;
            gpu::DeviceBuffer* sum = nullptr;
            for (std::size_t j = 0; j < st.branches.size(); ++j) {
                auto& br = st.branches[j];
                SignalRef r = y;
                for (auto& sub : br.subs) {
                    // ResBlock1: r + c2(lrelu(c1(lrelu(r)))); ResBlock2: r + c1(lrelu(r)).
                    SignalRef b = sub.c1->push(q, r, flush);
                    if (sub.c2) b = sub.c2->push(q, b, flush);
                    const SignalRef d = sub.skip->push(q, r, flush);
                    if (b.length != d.length) throw Error("HiFi-GAN stream: paths out of step");
                    if (d.length > 0)
                        backend_.axpby(q, static_cast<std::size_t>(st.channels) * d.length, 1.0f,
                                       *b.buffer, 1.0f, *d.buffer);
                    r = d;
                }
                const SignalRef a = br.align->push(q, r, flush);
                if (j == 0) {
                    length = a.length;
                    n = static_cast<std::size_t>(st.channels) * length;
                    sum = &sum_.need(backend_, n);
                } else if (a.length != length) {
                    throw Error("HiFi-GAN stream: resblocks out of step");
                }
                if (n > 0) backend_.axpby(q, n, 1.0f, *a.buffer, j == 0 ? 0.0f : 1.0f, *sum);
            }
            if (n > 0)
                backend_.axpby(q, n, 1.0f / static_cast<float>(st.branches.size()), *sum, 0.0f,
                               *sum);
            x = {sum, st.channels, std::max(length, 0)};
            // The next stage's upsampler takes x into its window before
            // anything writes `sum_` again.
        }
        const SignalRef out = post_->push(q, x, flush);
        if (out.length > 0) {
            const std::size_t n = static_cast<std::size_t>(out.length);
            backend_.activation(q, gpu::Activation::Tanh, *out.buffer, *out.buffer, n);
            const std::size_t at = values.size();
            values.resize(at + n);
            backend_.copy_to_host(q, values.data() + at, *out.buffer, 0, n);
        }
        backend_.synchronize(q);
    }

  private:
    struct Sub {
        std::unique_ptr<StreamConv> c1, c2;  // c2: ResBlock1 only
        std::unique_ptr<StreamDelay> skip;   // the residual, delayed by c1 (+ c2)
    };
    struct Branch {
        std::vector<Sub> subs;
        std::unique_ptr<StreamDelay> align;  // up to the slowest resblock of the stage
    };
    struct Stage {
        std::unique_ptr<StreamUpsample> up;
        std::vector<Branch> branches;
        int channels = 0, lag = 0;
    };
    std::unique_ptr<StreamConv> conv(const ConvLayer& c, std::optional<float> slope,
                                     ScratchBuffer& out) {
        return std::make_unique<StreamConv>(backend_, *queue_, c.shape, c.weight.buffer,
                                            c.bias.buffer, slope, scratch_, out);
    }

    const HifiGanNetwork& net_;
    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    // Declared before the layers, which keep references to them.
    StreamScratch scratch_;
    ScratchBuffer mel_, conv_out_, up_out_, residual_[2], sum_;
    std::unique_ptr<StreamConv> pre_, post_;
    std::vector<Stage> stages_;
};

std::unique_ptr<NetworkStream> HifiGanNetwork::open_stream(int right_context) const {
    if (!HifiGanStream::supports(*this)) return nullptr;
    auto s = std::make_unique<HifiGanStream>(*this);
    // The stream hands out frames once their right context is in: the
    // runner must have completed them by then.
    if (s->lag_samples() > static_cast<long>(right_context) * hop_) return nullptr;
    return s;
}

// Vocos: the embedding and each ConvNeXt block's depthwise conv are stream
// layers; everything else works frame by frame on what they complete, and
// each block's residual is delayed by its depthwise conv's lag.
class VocosStream final : public NetworkStream {
  public:
    explicit VocosStream(const VocosNetwork& net)
        : net_(net), backend_(net.backend_), queue_(backend_.create_queue()) {
        // The convs' outputs are read at once, so they share one buffer; the
        // residual stream alternates between two, each block's delay reading
        // the one the block before wrote.
        embed_ = std::make_unique<StreamConv>(backend_, *queue_, net.embed_.shape,
                                              net.embed_.weight.buffer, net.embed_.bias.buffer,
                                              std::nullopt, scratch_, conv_out_);
        for (std::size_t i = 0; i < net.blocks_.size(); ++i) {
            const auto& blk = net.blocks_[i];
            Block b;
            b.dw =
                std::make_unique<StreamConv>(backend_, *queue_, blk.dw.shape, blk.dw.weight.buffer,
                                             blk.dw.bias.buffer, std::nullopt, scratch_, conv_out_);
            b.skip = std::make_unique<StreamDelay>(backend_, *queue_, net.dim_, b.dw->lag(),
                                                   residual_[i % 2]);
            blocks_.push_back(std::move(b));
        }
    }

    static bool supports(const VocosNetwork& net) {
        if (!StreamConv::supports(net.embed_.shape)) return false;
        for (const auto& blk : net.blocks_)
            if (!StreamConv::supports(blk.dw.shape)) return false;
        return true;
    }
    int lag_frames() const {
        int lag = embed_->lag();
        for (const auto& b : blocks_) lag += b.dw->lag();
        return lag;
    }

    void reset() override {
        embed_->reset();
        for (auto& b : blocks_) {
            b.dw->reset();
            b.skip->reset();
        }
    }

    void push(const float* mel, int frames, bool flush, std::vector<float>& values) override {
        gpu::Queue& q = *queue_;
        const int dim = net_.dim_, inter = net_.inter_, n_fft = net_.n_fft_;
        const int bins = n_fft / 2 + 1;
        const std::size_t n_in = static_cast<std::size_t>(net_.n_mels_) * std::max(frames, 0);
        auto& in = mel_.need(backend_, n_in);
        if (n_in > 0) backend_.copy_to_device(q, in, 0, mel, n_in);
        const SignalRef h = embed_->push(q, {&in, net_.n_mels_, frames}, flush);
        const int t0 = h.length;
        auto& x0 = x0_.need(backend_, static_cast<std::size_t>(dim) * t0);
        if (t0 > 0) {
            auto& ht = ht_.need(backend_, static_cast<std::size_t>(dim) * t0);
            auto& hn = hn_.need(backend_, static_cast<std::size_t>(dim) * t0);
            backend_.transpose(q, dim, t0, *h.buffer, ht);
            backend_.layer_norm(q, t0, dim, net_.eps_, ht, net_.norm_w_.buffer, net_.norm_b_.buffer,
                                hn);
            backend_.transpose(q, t0, dim, hn, x0);
        }
        SignalRef x{&x0, dim, t0};
        for (std::size_t i = 0; i < blocks_.size(); ++i) {
            const auto& w = net_.blocks_[i];
            const SignalRef d = blocks_[i].dw->push(q, x, flush);
            const SignalRef r = blocks_[i].skip->push(q, x, flush);
            if (d.length != r.length) throw Error("Vocos stream: paths out of step");
            const int t = d.length;
            if (t > 0) {
                const std::size_t n = static_cast<std::size_t>(dim) * t;
                auto& ht = ht_.need(backend_, n);
                auto& hn = hn_.need(backend_, n);
                auto& u = u_.need(backend_, static_cast<std::size_t>(inter) * t);
                backend_.transpose(q, dim, t, *d.buffer, ht);
                backend_.layer_norm(q, t, dim, net_.eps_, ht, w.norm_w.buffer, w.norm_b.buffer, hn);
                backend_.gemm(q, false, true, t, inter, dim, 1.0f, hn, dim, w.pw1_w.buffer, dim,
                              0.0f, u, inter);
                backend_.add_bias(q, t, inter, w.pw1_b.buffer, false, u);
                backend_.activation(q, gpu::Activation::Gelu, u, u,
                                    static_cast<std::size_t>(inter) * t);
                // The delayed residual takes the block's output in place.
                backend_.gemm(q, false, true, dim, t, inter, 1.0f, w.pw2_w.buffer, inter, u, inter,
                              1.0f, *r.buffer, t);
                backend_.add_bias(q, dim, t, w.pw2_b.buffer, true, *r.buffer);
            }
            x = r;
        }
        const int t = x.length;
        if (t > 0) {
            const std::size_t n = static_cast<std::size_t>(dim) * t;
            auto& ht = ht_.need(backend_, n);
            auto& hn = hn_.need(backend_, n);
            auto& u = u_.need(backend_, static_cast<std::size_t>(n_fft + 2) * t);
            auto& spec = spec_.need(backend_, 2 * static_cast<std::size_t>(bins) * t);
            auto& out = out_.need(backend_, static_cast<std::size_t>(n_fft) * t);
            backend_.transpose(q, dim, t, *x.buffer, ht);
            backend_.layer_norm(q, t, dim, net_.eps_, ht, net_.final_w_.buffer,
                                net_.final_b_.buffer, hn);
            backend_.gemm(q, false, true, t, n_fft + 2, dim, 1.0f, hn, dim, net_.head_w_.buffer,
                          dim, 0.0f, u, n_fft + 2);
            backend_.add_bias(q, t, n_fft + 2, net_.head_b_.buffer, false, u);
            backend_.polar_spectrum(q, t, bins, net_.max_mag_, u, spec);
            backend_.irfft(q, n_fft, t, spec, out);
            const std::size_t at = values.size();
            values.resize(at + static_cast<std::size_t>(n_fft) * t);
            backend_.copy_to_host(q, values.data() + at, out, 0,
                                  static_cast<std::size_t>(n_fft) * t);
        }
        backend_.synchronize(q);
    }

  private:
    struct Block {
        std::unique_ptr<StreamConv> dw;
        std::unique_ptr<StreamDelay> skip;
    };
    const VocosNetwork& net_;
    gpu::Backend& backend_;
    std::unique_ptr<gpu::Queue> queue_;
    // Declared before the layers, which keep references to them.
    StreamScratch scratch_;
    ScratchBuffer conv_out_, residual_[2];
    ScratchBuffer mel_, x0_, ht_, hn_, u_, spec_, out_;
    std::unique_ptr<StreamConv> embed_;
    std::vector<Block> blocks_;
};

std::unique_ptr<NetworkStream> VocosNetwork::open_stream(int right_context) const {
    if (!VocosStream::supports(*this)) return nullptr;
    auto s = std::make_unique<VocosStream>(*this);
    if (s->lag_frames() > right_context) return nullptr;
    return s;
}

}  // namespace

// ---- NeuralModel ------------------------------------------------------------------

std::shared_ptr<NeuralModel> NeuralModel::load(const std::string& path,
                                               std::shared_ptr<gpu::Backend> backend) {
    const LefFile file = LefFile::open(path);
    return load(file, path, std::move(backend));
}

std::shared_ptr<NeuralModel> NeuralModel::load(const LefFile& file, const std::string& label,
                                               std::shared_ptr<gpu::Backend> backend) {
    if (!backend) throw Error(label + ": no compute backend to load the model on");
    std::shared_ptr<NeuralModel> m(new NeuralModel());
    m->label_ = label;
    m->backend_ = std::move(backend);
    const Metadata meta(file.metadata_json(), label);
    m->audio_ = read_audio_params(meta);
    auto queue = m->backend_->create_queue();
    WeightLoader loader(file, *m->backend_, *queue);
    if (m->audio_.architecture == "hifigan") {
        m->network_ = std::make_unique<HifiGanNetwork>(meta, m->audio_, loader, *m->backend_,
                                                       m->left_context_, m->right_context_);
    } else {
        if (m->audio_.padding != "center")
            meta.fail("padding", "must be 'center' for vocos (the only head padding supported)");
        m->network_ = std::make_unique<VocosNetwork>(
            meta, m->audio_, loader, *m->backend_, m->left_context_, m->right_context_, m->window_);
    }
    loader.finish();
    return m;
}

ModelAudioParams read_model_audio(const std::string& path) {
    const LefFile file = LefFile::open(path);
    return read_audio_params(Metadata(file.metadata_json(), path));
}

int NeuralModel::streaming_latency_samples() const {
    if (audio_.architecture == "vocos") {
        const int half = audio_.n_fft / 2;
        return (right_context_ + (half + audio_.hop - 1) / audio_.hop) * audio_.hop;
    }
    return right_context_ * audio_.hop;
}

void NeuralModel::run(const float* mel, int frames, int first, int count, float* out) const {
    std::lock_guard lock(run_mu_);
    network_->run(mel, frames, first, count, out);
}

std::vector<float> NeuralModel::vocode(std::span<const float> mel, int frames) const {
    if (frames < 0 || mel.size() != static_cast<std::size_t>(frames) * audio_.n_mels)
        throw Error(label_ + ": mel has " + std::to_string(mel.size()) + " values, expected " +
                    std::to_string(audio_.n_mels) + " x frames");
    // shared_ptr aliasing without ownership: the stream lives only in this call.
    MelVocoderStream stream(
        std::shared_ptr<const NeuralModel>(std::shared_ptr<const NeuralModel>(), this));
    // Every frame is here: one run over the whole utterance (push() then
    // finish() would run the last frames' context twice).
    stream.append(mel, frames);
    return stream.finish();
}

dsp::LogMelConfig log_mel_config(const ModelAudioParams& a) {
    dsp::LogMelConfig c;
    c.sample_rate = a.sample_rate;
    c.n_fft = static_cast<std::size_t>(a.n_fft);
    c.hop = static_cast<std::size_t>(a.hop);
    c.win_length = static_cast<std::size_t>(a.win_length);
    c.n_mels = static_cast<std::size_t>(a.n_mels);
    c.fmin = a.fmin;
    c.fmax = a.fmax;
    c.scale = a.mel_scale == "htk" ? dsp::MelScale::Htk : dsp::MelScale::Slaney;
    c.norm = a.mel_norm == "slaney" ? dsp::MelNorm::Slaney : dsp::MelNorm::None;
    c.power = a.mel_power;
    c.magnitude_eps = a.magnitude_eps;
    c.log_floor = a.log_floor;
    c.padding = a.padding == "center" ? dsp::MelPadding::Center : dsp::MelPadding::ReflectHalf;
    return c;
}

void copy_mel_frames(std::span<const float> mel, int n_mels, int frames, int first, int count,
                     std::vector<float>& out) {
    if (first < 0 || count < 0 || first + count > frames ||
        mel.size() != static_cast<std::size_t>(n_mels) * frames)
        throw Error("copy_mel_frames: frames [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") are outside the mel");
    out.resize(static_cast<std::size_t>(count) * n_mels);
    for (int c = 0; c < n_mels; ++c)
        std::copy_n(mel.begin() + static_cast<std::ptrdiff_t>(c) * frames + first, count,
                    out.begin() + static_cast<std::ptrdiff_t>(c) * count);
}

std::shared_ptr<gpu::Backend> open_model_backend(const std::string& kind, int device,
                                                 std::string* note) {
    auto& registry = gpu::DeviceRegistry::instance();
    const auto request = gpu::with_environment(gpu::parse_backend_request(kind, device));
    const gpu::DeviceInfo d = registry.resolve(request);
    const bool use = d.kind != gpu::BackendKind::Cpu && (request.kind != "auto" || d.is_gpu);
    if (!use) {
        if (note)
            *note = d.kind == gpu::BackendKind::Cpu ? "CPU (no GPU found)"
                                                    : "CPU (" + d.name + " is not a GPU)";
        return gpu::shared_cpu_backend();
    }
    auto backend = registry.open(request);
    if (note) *note = std::string(gpu::to_string(d.kind)) + " " + d.name;
    return backend;
}

// ---- MelVocoderStream ---------------------------------------------------------------

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
        runner()->push(window_mel_.data(), w, flush, pending_);
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
