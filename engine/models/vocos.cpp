#include "engine/models/vocos.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/models/device_weights.h"
#include "engine/models/stream_layers.h"

namespace etude::engine {
namespace {

using Json = MetadataReader::Json;

// The backbone and head: hyperparameters checked, weights on the device (the
// layer scale folded into the second linear layer of each block).
class VocosNetwork final : public VocoderNetwork {
  public:
    VocosNetwork(const MetadataReader& meta, const ModelAudioParams& audio, WeightLoader& loader,
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
            const auto b = tensor_name("backbone.convnext.", i, ".");
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

    void run(const float* mel, int frames, int first, int count, float* out) override;

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

    // Vocos never batches streams: `batching` has nothing to choose.
    void push(const float* mel, int frames, bool flush, std::vector<float>& values,
              Batching batching) override;

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

// ---- the whole-window run and the incremental run, side by side ----------
//
// Whole window: the embedding, the ConvNeXt blocks and the ISTFT head
// over the window at once.
void VocosNetwork::run(const float* mel, int frames, int first, int count, float* out) {
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
        backend_.layer_norm(q, frames, dim_, eps_, ht, blk.norm_w.buffer, blk.norm_b.buffer, hn);
        // u[T][inter] = hn[T][dim] * W1^T + b1
        backend_.gemm(q, false, true, frames, inter_, dim_, 1.0f, hn, dim_, blk.pw1_w.buffer, dim_,
                      0.0f, u, inter_);
        backend_.add_bias(q, frames, inter_, blk.pw1_b.buffer, false, u);
        backend_.activation(q, gpu::Activation::Gelu, u, u, static_cast<std::size_t>(inter_) * T);
        // x[dim][T] += (gamma W2)[dim][inter] * u^T + gamma b2
        backend_.gemm(q, false, true, dim_, frames, inter_, 1.0f, blk.pw2_w.buffer, inter_, u,
                      inter_, 1.0f, x, frames);
        backend_.add_bias(q, dim_, frames, blk.pw2_b.buffer, true, x);
    }
    backend_.transpose(q, dim_, frames, x, ht);
    backend_.layer_norm(q, frames, dim_, eps_, ht, final_w_.buffer, final_b_.buffer, hn);
    // Head: [T][n_fft+2] = hn * Wout^T + b, then polar -> complex -> inverse FFT.
    backend_.gemm(q, false, true, frames, n_fft_ + 2, dim_, 1.0f, hn, dim_, head_w_.buffer, dim_,
                  0.0f, u, n_fft_ + 2);
    backend_.add_bias(q, frames, n_fft_ + 2, head_b_.buffer, false, u);
    backend_.polar_spectrum(q, frames, bins, max_mag_, u, spec);
    backend_.irfft(q, n_fft_, frames, spec, frames_out);
    backend_.copy_to_host(q, out, frames_out, static_cast<std::size_t>(first) * n_fft_,
                          static_cast<std::size_t>(count) * n_fft_);
    backend_.synchronize(q);
}

// Incremental: the embedding and the depthwise convs as stream layers; the
// rest frame by frame on what they complete.
void VocosStream::push(const float* mel, int frames, bool flush, std::vector<float>& values,
                       Batching) {
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
            backend_.gemm(q, false, true, t, inter, dim, 1.0f, hn, dim, w.pw1_w.buffer, dim, 0.0f,
                          u, inter);
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
        backend_.layer_norm(q, t, dim, net_.eps_, ht, net_.final_w_.buffer, net_.final_b_.buffer,
                            hn);
        backend_.gemm(q, false, true, t, n_fft + 2, dim, 1.0f, hn, dim, net_.head_w_.buffer, dim,
                      0.0f, u, n_fft + 2);
        backend_.add_bias(q, t, n_fft + 2, net_.head_b_.buffer, false, u);
        backend_.polar_spectrum(q, t, bins, net_.max_mag_, u, spec);
        backend_.irfft(q, n_fft, t, spec, out);
        const std::size_t at = values.size();
        values.resize(at + static_cast<std::size_t>(n_fft) * t);
        backend_.copy_to_host(q, values.data() + at, out, 0, static_cast<std::size_t>(n_fft) * t);
    }
    backend_.synchronize(q);
}

std::unique_ptr<NetworkStream> VocosNetwork::open_stream(int right_context) const {
    if (!VocosStream::supports(*this)) return nullptr;
    auto s = std::make_unique<VocosStream>(*this);
    if (s->lag_frames() > right_context) return nullptr;
    return s;
}

}  // namespace

std::unique_ptr<VocoderNetwork> make_vocos_network(const MetadataReader& meta,
                                                   const ModelAudioParams& audio,
                                                   WeightLoader& loader, gpu::Backend& backend,
                                                   int& left_context, int& right_context,
                                                   std::vector<float>& window) {
    return std::make_unique<VocosNetwork>(meta, audio, loader, backend, left_context, right_context,
                                          window);
}

}  // namespace etude::engine
