#include "engine/models/vits/flow_network.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/error.h"
#include "engine/models/device_weights.h"
#include "engine/models/vits/flow_stream.h"

namespace etude::engine {

namespace {

gpu::DeviceBuffer upload(gpu::Backend& b, gpu::Queue& q, const std::vector<float>& v,
                         std::vector<std::vector<float>>& staged) {
    staged.push_back(v);
    gpu::DeviceBuffer d = b.allocate(v.size(), kWeightsTag);
    b.copy_to_device(q, d, 0, staged.back().data(), v.size());
    return d;
}

using Conv = VitsFlowConv;

}  // namespace

VitsFlowNetwork::~VitsFlowNetwork() = default;

bool VitsFlowNetwork::same_speaker_biases(const VitsFlowNetwork& other) const {
    if (other.couplings_.size() != couplings_.size()) return false;
    for (std::size_t k = 0; k < couplings_.size(); ++k) {
        const auto &mine = couplings_[k].in_layers, &theirs = other.couplings_[k].in_layers;
        if (mine.size() != theirs.size()) return false;
        for (std::size_t l = 0; l < mine.size(); ++l)
            if (mine[l].b.handle() != theirs[l].b.handle()) return false;
    }
    return true;
}

ReplayStats VitsFlowNetwork::batch_replay_stats() const {
    return batching_->replay_stats();
}

namespace {

// Piper runs flows.(2(n-1)), ..., flows.0 after a flip each: the k-th run
// sees the latent flipped k+1 times. The weights' prefix of the k-th run.
std::string run_prefix(const VitsHyperparameters& hp, int k) {
    return "flow.flows." + std::to_string(2 * (hp.flow_couplings - 1 - k));
}

}  // namespace

bool VitsFlowNetwork::folds_a_speaker(const std::string& role) {
    const auto has = [&](const char* part) { return role.find(part) != std::string::npos; };
    return role.rfind("flow.", 0) == 0 &&
           (has(".enc.cond_layer.") || (has(".enc.in_layers.") && has(".bias")));
}

VitsFlowNetwork::SpeakerBiases VitsFlowNetwork::speaker_biases(const VitsWeights& w, int speaker) {
    const auto& hp = w.hp;
    const int hid = hp.hidden_channels;
    if (hp.num_speakers > 1 && (speaker < 0 || speaker >= hp.num_speakers))
        throw Error("VITS flow: speaker " + std::to_string(speaker) + " is outside the voice's " +
                    std::to_string(hp.num_speakers) + " speakers");
    std::vector<double> g;
    if (hp.num_speakers > 1) {
        const auto& emb = w.get("emb_g.weight").values;
        g.assign(emb.begin() + std::ptrdiff_t(speaker) * hp.gin_channels,
                 emb.begin() + std::ptrdiff_t(speaker + 1) * hp.gin_channels);
    }
    SpeakerBiases biases(std::size_t(hp.flow_couplings));
    for (int k = 0; k < hp.flow_couplings; ++k) {
        const std::string r = run_prefix(hp, k);
        std::vector<float> cond;  // cond_layer(g): per WaveNet layer, 2*hid values
        if (!g.empty()) {
            const auto& cw = w.get(r + ".enc.cond_layer.weight").values;
            const auto& cb = w.get(r + ".enc.cond_layer.bias").values;
            cond.resize(cb.size());
            for (std::size_t o = 0; o < cb.size(); ++o) {
                double acc = cb[o];
                for (std::size_t i = 0; i < g.size(); ++i)
                    acc += double(cw[o * g.size() + i]) * g[i];
                cond[o] = float(acc);
            }
        }
        for (int l = 0; l < hp.wn_layers; ++l) {
            auto in_b = w.get(r + ".enc.in_layers." + std::to_string(l) + ".bias").values;
            if (!cond.empty())
                for (int o = 0; o < 2 * hid; ++o)
                    in_b[std::size_t(o)] += cond[std::size_t(l * 2 * hid + o)];
            biases[std::size_t(k)].push_back(std::move(in_b));
        }
    }
    return biases;
}

VitsFlowNetwork::VitsFlowNetwork(const VitsWeights& w, int speaker,
                                 std::shared_ptr<gpu::Backend> backend)
    : backend_(std::move(backend)),
      join_(backend_->info().is_gpu),
      batching_(std::make_shared<SharedBatching<VitsFlowPush>>(*backend_)) {
    const auto& hp = w.hp;
    channels_ = hp.inter_channels;
    hidden_ = hp.hidden_channels;
    kernel_ = hp.wn_kernel;
    const int half = channels_ / 2, hid = hidden_;
    const SpeakerBiases biases = speaker_biases(w, speaker);  // (checks the speaker)
    auto queue = backend_->create_queue();
    auto& b = *backend_;
    std::vector<std::vector<float>> staged;
    const auto conv = [&](std::vector<float> weight, std::vector<float> bias, int out, int in,
                          int k) {
        Conv c;
        c.in = in;
        c.out = out;
        c.k = k;
        c.w = upload(b, *queue, weight, staged);
        c.b = upload(b, *queue, bias, staged);
        return c;
    };
    for (int k = 0; k < hp.flow_couplings; ++k) {
        const std::string r = run_prefix(hp, k);
        VitsFlowCoupling c;
        c.mirrored = k % 2 == 0;
        auto pre_w = w.get(r + ".pre.weight").values;  // [hid][half][1]
        if (c.mirrored)
            for (int o = 0; o < hid; ++o)
                std::reverse(pre_w.begin() + o * half, pre_w.begin() + (o + 1) * half);
        c.pre = conv(pre_w, w.get(r + ".pre.bias").values, hid, half, 1);
        for (int l = 0; l < hp.wn_layers; ++l) {
            const std::string n = std::to_string(l);
            c.in_layers.push_back(conv(w.get(r + ".enc.in_layers." + n + ".weight").values,
                                       biases[std::size_t(k)][std::size_t(l)], 2 * hid, hid,
                                       kernel_));
            const auto& rs_w = w.get(r + ".enc.res_skip_layers." + n + ".weight").values;
            const auto& rs_b = w.get(r + ".enc.res_skip_layers." + n + ".bias").values;
            const std::size_t rows = std::size_t(hid) * hid;
            if (l < hp.wn_layers - 1) {
                c.res.push_back(conv({rs_w.begin(), rs_w.begin() + std::ptrdiff_t(rows)},
                                     {rs_b.begin(), rs_b.begin() + hid}, hid, hid, 1));
                c.skip.push_back(conv({rs_w.begin() + std::ptrdiff_t(rows), rs_w.end()},
                                      {rs_b.begin() + hid, rs_b.end()}, hid, hid, 1));
            } else {
                c.skip.push_back(conv(rs_w, rs_b, hid, hid, 1));
            }
        }
        auto post_w = w.get(r + ".post.weight").values;  // [half][hid][1]
        auto post_b = w.get(r + ".post.bias").values;
        if (c.mirrored) {
            for (int o = 0; o < half / 2; ++o) {
                std::swap_ranges(post_w.begin() + o * hid, post_w.begin() + (o + 1) * hid,
                                 post_w.begin() + (half - 1 - o) * hid);
                std::swap(post_b[std::size_t(o)], post_b[std::size_t(half - 1 - o)]);
            }
        }
        c.post = conv(post_w, post_b, half, hid, 1);
        couplings_.push_back(std::move(c));
    }
    ends_flipped_ = hp.flow_couplings % 2 == 1;
    b.synchronize(*queue);
}

VitsFlowNetwork::VitsFlowNetwork(const VitsFlowNetwork& source,
                                 std::shared_ptr<gpu::Backend> backend)
    : backend_(std::move(backend)),
      join_(backend_->info().is_gpu),
      channels_(source.channels_),
      hidden_(source.hidden_),
      kernel_(source.kernel_),
      ends_flipped_(source.ends_flipped_),
      batching_(std::make_shared<SharedBatching<VitsFlowPush>>(*backend_)) {
    auto& from = source.backend();
    const auto from_queue = from.create_queue();
    const auto queue = backend_->create_queue();
    std::vector<std::vector<float>> staged;
    const auto copy = [&](const VitsFlowConv& c) {
        const auto read = [&](const gpu::DeviceBuffer& d, std::size_t floats) {
            std::vector<float> v(floats);
            from.copy_to_host(*from_queue, v.data(), d, 0, v.size());
            from.synchronize(*from_queue);
            return upload(*backend_, *queue, v, staged);
        };
        VitsFlowConv out;
        out.in = c.in;
        out.out = c.out;
        out.k = c.k;
        out.w = read(c.w, std::size_t(c.out) * std::size_t(c.in) * std::size_t(c.k));
        out.b = read(c.b, std::size_t(c.out));
        return out;
    };
    for (const VitsFlowCoupling& c : source.couplings_) {
        VitsFlowCoupling d;
        d.mirrored = c.mirrored;
        d.pre = copy(c.pre);
        d.post = copy(c.post);
        for (const auto& l : c.in_layers) d.in_layers.push_back(copy(l));
        for (const auto& l : c.res) d.res.push_back(copy(l));
        for (const auto& l : c.skip) d.skip.push_back(copy(l));
        couplings_.push_back(std::move(d));
    }
    backend_->synchronize(*queue);
}

namespace {

// The flow that owns `base`'s weights: `base`, or the one it borrows them
// from (so that sharing never makes a chain of flows a speaker each).
std::shared_ptr<const VitsFlowNetwork> owner_of_weights(
    std::shared_ptr<const VitsFlowNetwork> base,
    const std::shared_ptr<const VitsFlowNetwork>& its) {
    if (!base) throw std::invalid_argument("VITS flow: no flow to share the weights of");
    return its ? its : base;
}

}  // namespace

VitsFlowNetwork::VitsFlowNetwork(std::shared_ptr<const VitsFlowNetwork> base,
                                 const SpeakerBiases& biases)
    : weights_owner_(owner_of_weights(base, base ? base->weights_owner_ : nullptr)),
      backend_(weights_owner_->backend_),
      join_(base->join_.load()),
      channels_(weights_owner_->channels_),
      hidden_(weights_owner_->hidden_),
      kernel_(weights_owner_->kernel_),
      ends_flipped_(weights_owner_->ends_flipped_),
      batching_(weights_owner_->batching_) {
    const auto& from = weights_owner_->couplings_;
    // Every shape checked before anything is uploaded.
    if (biases.size() != from.size())
        throw std::invalid_argument("VITS flow: biases for " + std::to_string(biases.size()) +
                                    " couplings, not " + std::to_string(from.size()));
    for (std::size_t k = 0; k < from.size(); ++k) {
        const VitsFlowCoupling& c = from[k];
        if (biases[k].size() != c.in_layers.size())
            throw std::invalid_argument("VITS flow: biases for " +
                                        std::to_string(biases[k].size()) + " layers, not " +
                                        std::to_string(c.in_layers.size()));
        for (std::size_t l = 0; l < c.in_layers.size(); ++l)
            if (biases[k][l].size() != std::size_t(c.in_layers[l].out))
                throw std::invalid_argument("VITS flow: a layer bias of " +
                                            std::to_string(biases[k][l].size()) + " values, not " +
                                            std::to_string(c.in_layers[l].out));
    }
    const auto queue = backend_->create_queue();
    std::vector<std::vector<float>> staged;
    const auto borrowed = [](const VitsFlowConv& c) {
        VitsFlowConv out;
        out.in = c.in;
        out.out = c.out;
        out.k = c.k;
        out.w = c.w.borrow();
        out.b = c.b.borrow();
        return out;
    };
    for (std::size_t k = 0; k < from.size(); ++k) {
        const VitsFlowCoupling& c = from[k];
        VitsFlowCoupling d;
        d.mirrored = c.mirrored;
        d.pre = borrowed(c.pre);
        d.post = borrowed(c.post);
        for (std::size_t l = 0; l < c.in_layers.size(); ++l) {
            VitsFlowConv layer = borrowed(c.in_layers[l]);
            layer.b = upload(*backend_, *queue, biases[k][l], staged);
            d.in_layers.push_back(std::move(layer));
        }
        for (const auto& l : c.res) d.res.push_back(borrowed(l));
        for (const auto& l : c.skip) d.skip.push_back(borrowed(l));
        couplings_.push_back(std::move(d));
    }
    backend_->synchronize(*queue);
}

VitsFlowNetwork::SpeakerBiases VitsFlowNetwork::speaker_biases() const {
    const auto queue = backend_->create_queue();
    SpeakerBiases biases;
    for (const VitsFlowCoupling& c : couplings_) {
        biases.emplace_back();
        for (const VitsFlowConv& l : c.in_layers) {
            std::vector<float> bias(std::size_t(l.out));
            backend_->copy_to_host(*queue, bias.data(), l.b, 0, bias.size());
            biases.back().push_back(std::move(bias));
        }
    }
    backend_->synchronize(*queue);
    return biases;
}

int VitsFlowNetwork::context() const {
    return static_cast<int>(couplings_.size()) *
           static_cast<int>(couplings_.empty() ? 0 : couplings_[0].in_layers.size()) *
           ((kernel_ - 1) / 2);
}

void VitsFlowNetwork::run(std::vector<float>& z, int frames) const {
    if (frames <= 0) return;
    if (z.size() != std::size_t(channels_) * std::size_t(frames))
        throw Error("VITS flow: the latent holds " + std::to_string(z.size()) + " values, not " +
                    std::to_string(channels_) + " x " + std::to_string(frames));
    VitsFlowStream stream(*this);
    std::vector<float> out(z.size());
    stream.run_until(z, frames, frames, out);
    z = std::move(out);
}

}  // namespace etude::engine
