// VitsPrior (sampling, staged durations) and VitsTextToLatent (the checks,
// the prior, run() with the host's flow in reverse), over the network's
// parts in text_to_latent_network.h.
#include "engine/models/vits/text_to_latent.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/error.h"
#include "engine/models/vits/text_to_latent_network.h"

namespace etude::engine {

namespace vits_host {

// The residual-coupling flow in reverse, on the host: the reference the
// backend flow (VitsFlowNetwork, VitsFlowStream) is tested against.
void TextToLatentNetwork::flow(Signal& z, const std::vector<double>* g) const {
    const int half = z.c / 2, hid = hp_.hidden_channels, k = hp_.wn_kernel;
    for (int f = hp_.flow_couplings - 1; f >= 0; --f) {
        for (int a = 0, b = z.c - 1; a < b; ++a, --b)  // Flip: reverse the channels
            std::swap_ranges(z.row(a), z.row(a) + z.t, z.row(b));
        const std::string r = "flow.flows." + std::to_string(2 * f);
        Signal x0(half, z.t);
        std::copy(z.v.begin(), z.v.begin() + std::ptrdiff_t(x0.v.size()), x0.v.begin());
        Signal x = conv1d(x0, conv(r + ".pre"), 1, 0, 0);
        Signal cond;
        if (g) {
            Signal gs(int(g->size()), 1);
            gs.v = *g;
            cond = conv1d(gs, conv(r + ".enc.cond_layer"), 1, 0, 0);
        }
        Signal output(hid, z.t);
        for (int l = 0; l < hp_.wn_layers; ++l) {
            const std::string n = std::to_string(l);
            Signal in = conv1d(x, conv(r + ".enc.in_layers." + n), 1, (k - 1) / 2, (k - 1) / 2);
            if (g)
                for (int c = 0; c < 2 * hid; ++c)
                    for (int i = 0; i < in.t; ++i)
                        in.row(c)[i] += cond.v[std::size_t(l * 2 * hid + c)];
            Signal acts(hid, z.t);
            for (int c = 0; c < hid; ++c)
                for (int i = 0; i < z.t; ++i)
                    acts.row(c)[i] =
                        std::tanh(in.row(c)[i]) / (1.0 + std::exp(-in.row(hid + c)[i]));
            const Signal rs = conv1d(acts, conv(r + ".enc.res_skip_layers." + n), 1, 0, 0);
            if (l < hp_.wn_layers - 1) {
                for (int c = 0; c < hid; ++c)
                    for (int i = 0; i < z.t; ++i) {
                        x.row(c)[i] += rs.row(c)[i];
                        output.row(c)[i] += rs.row(hid + c)[i];
                    }
            } else {
                add(output, rs);
            }
        }
        const Signal m = conv1d(output, conv(r + ".post"), 1, 0, 0);
        for (int c = 0; c < half; ++c)
            for (int i = 0; i < z.t; ++i) z.row(half + c)[i] -= m.row(c)[i];
    }
}

}  // namespace vits_host

namespace {

using vits_host::conv1d;
using vits_host::Signal;
using Network = vits_host::TextToLatentNetwork;

// Every tensor under it (both convolutions' weights and biases, each layer)
// is copied into a WinogradConv3 when the kernel is 3.
constexpr const char* kFeedForwardRoles = "enc_p.encoder.ffn_layers.";

}  // namespace

VitsPrior::VitsPrior(int channels, std::vector<double> stats, std::vector<int> durations,
                     int frames, double noise_scale, std::uint64_t seed)
    : channels_(channels),
      frames_(frames),
      phonemes_(channels > 0 ? int(stats.size() / (2 * std::size_t(channels))) : 0),
      stats_(std::move(stats)),
      durations_(std::move(durations)),
      noise_scale_(noise_scale),
      noise_(seed) {
    if (stats_.size() != std::size_t(2) * channels_ * phonemes_ ||
        durations_.size() > std::size_t(phonemes_))
        throw std::logic_error("VITS prior: the statistics do not match the phonemes");
}

void VitsPrior::sample(int first, int count, float* out) {
    if (first != next_frame_ || count < 0 || first + count > frames_)
        throw std::logic_error("VITS prior: frames " + std::to_string(first) + " to " +
                               std::to_string(first + count) + " asked for, the next is " +
                               std::to_string(next_frame_) + " of " + std::to_string(frames_));
    for (int j = 0; j < count; ++j, ++next_frame_) {
        // The phoneme this frame belongs to; none (mean 0, deviation 1)
        // for the one frame of a sentence whose durations are all zero.
        while (phoneme_ < int(durations_.size()) && left_in_phoneme_ == 0)
            left_in_phoneme_ = durations_[std::size_t(phoneme_++)];
        const int p = left_in_phoneme_ > 0 ? phoneme_ - 1 : -1;
        if (left_in_phoneme_ > 0) --left_in_phoneme_;
        for (int c = 0; c < channels_; ++c) {
            const double m = p < 0 ? 0.0 : stats_[std::size_t(c) * phonemes_ + p];
            const double logs = p < 0 ? 0.0 : stats_[(std::size_t(channels_) + c) * phonemes_ + p];
            out[std::size_t(c) * count + j] =
                static_cast<float>(m + normal_(noise_) * std::exp(logs) * noise_scale_);
        }
    }
}

std::vector<float> VitsPrior::sample_all() {
    std::vector<float> z(std::size_t(channels_) * frames_);
    sample(0, frames_, z.data());
    return z;
}

VitsTextToLatent::VitsTextToLatent(std::shared_ptr<const VitsWeights> weights)
    : w_(std::move(weights)) {
    if (!w_) throw Error("VITS: no weights");
    // Piper's feed-forward convolutions all have kernel 3.
    if (w_->hp.ffn_kernel == 3)
        for (int l = 0; l < w_->hp.n_layers; ++l)
            for (const char* c : {".conv_1", ".conv_2"}) {
                const std::string role = kFeedForwardRoles + std::to_string(l) + c;
                const VitsTensor& weight = w_->get(role + ".weight");
                if (weight.dims.size() != 3 || weight.dims[2] != 3)
                    throw Error("VITS: " + role + " is not a kernel-3 convolution");
                ffn_.emplace_back(weight.values.data(), w_->get(role + ".bias").values.data(),
                                  int(weight.dims[0]), int(weight.dims[1]));
            }
}

std::string VitsTextToLatent::copied_weights() const {
    return ffn_.empty() ? std::string() : std::string(kFeedForwardRoles);
}

VitsLatent VitsTextToLatent::run(std::span<const std::int64_t> ids, int speaker,
                                 const VitsScales& scales, std::mt19937_64& noise) const {
    VitsLatent out = sample_prior(ids, speaker, scales, noise);
    Signal z(out.channels, out.frames);
    std::copy(out.z.begin(), out.z.end(), z.v.begin());
    const std::vector<double> g = speaker_vector(speaker);
    Network(*w_, ffn_).flow(z, g.empty() ? nullptr : &g);
    out.z.assign(z.v.begin(), z.v.end());
    return out;
}

VitsLatent VitsTextToLatent::sample_prior(std::span<const std::int64_t> ids, int speaker,
                                          const VitsScales& scales, std::mt19937_64& noise) const {
    VitsPrior p = prior(ids, speaker, scales, noise);
    VitsLatent out;
    out.channels = p.channels();
    out.frames = p.frames();
    out.durations = p.durations();
    out.z = p.sample_all();
    return out;
}

std::vector<double> VitsTextToLatent::speaker_vector(int speaker) const {
    const auto& hp = w_->hp;
    if (hp.num_speakers <= 1) return {};
    if (speaker < 0 || speaker >= hp.num_speakers)
        throw Error("VITS: speaker " + std::to_string(speaker) + " is outside the voice's " +
                    std::to_string(hp.num_speakers) + " speakers");
    const auto& emb = w_->get("emb_g.weight").values;
    return {emb.begin() + std::ptrdiff_t(speaker) * hp.gin_channels,
            emb.begin() + std::ptrdiff_t(speaker + 1) * hp.gin_channels};
}

namespace {

// Columns [t0, t1) of a signal.
Signal columns(const Signal& x, int t0, int t1) {
    Signal y(x.c, t1 - t0);
    for (int c = 0; c < x.c; ++c) std::copy(x.row(c) + t0, x.row(c) + t1, y.row(c));
    return y;
}

// Durations of phonemes [from, to) of `logw` (indexed from phoneme 0)
// appended to `durations`, scaled and rounded up as Piper does; returns
// their frames, at most kMaxFrames + 1 (so a sum cannot overflow).
int append_durations(const std::vector<double>& logw, int from, int to, double length_scale,
                     std::vector<int>& durations) {
    constexpr int limit = VitsTextToLatent::kMaxFrames;
    int total = 0;
    for (int i = from; i < to; ++i) {
        const double d = std::ceil(std::exp(logw[std::size_t(i)]) * length_scale);
        const int frames = d > 0 ? int(std::min(d, double(limit) + 1)) : 0;
        durations.push_back(frames);
        total = int(std::min<long long>(static_cast<long long>(total) + frames, limit + 1LL));
    }
    return total;
}

// A sentence longer than this is a broken voice or an absurd
// length_scale; refusing it keeps memory bounded (the latent is
// inter_channels floats per frame, twice).
void check_total(int total) {
    if (total > VitsTextToLatent::kMaxFrames)
        throw Error("VITS: the durations add up to " + std::to_string(total) + " frames (at most " +
                    std::to_string(VitsTextToLatent::kMaxFrames) +
                    "): length_scale too large, or a broken voice");
}

}  // namespace

// What a staged prior keeps for its later durations: the encoder's output
// and the predictor's noise for the whole sentence (drawn with the first
// ones, so the caller's generator moves as for a whole prior).
struct VitsPrior::PendingDurations {
    std::shared_ptr<const VitsWeights> weights;
    Signal enc, noise;
    std::vector<double> speaker;  // empty for one speaker
    double length_scale = 1;
};

void VitsPrior::complete_durations() {
    if (!pending_) return;
    const PendingDurations& p = *pending_;
    const Network net(*p.weights, {});
    // The whole sentence, as a whole prior makes it; the first durations
    // (already in use) are kept as they were made.
    const std::vector<double> logw =
        net.log_durations(p.enc, p.speaker.empty() ? nullptr : &p.speaker, p.noise);
    const int known = int(durations_.size());
    std::vector<int> rest;
    const long long total = static_cast<long long>(frames_) +
                            append_durations(logw, known, p.enc.t, p.length_scale, rest);
    check_total(int(std::min<long long>(total, VitsTextToLatent::kMaxFrames + 1LL)));
    durations_.insert(durations_.end(), rest.begin(), rest.end());
    frames_ = std::max(int(total), 1);
    pending_.reset();
}

void check_phoneme_ids(const VitsHyperparameters& hp, std::span<const std::int64_t> ids) {
    if (ids.empty()) throw Error("VITS: no phoneme ids");
    for (auto id : ids)
        if (id < 0 || id >= hp.num_symbols)
            throw Error("VITS: phoneme id " + std::to_string(id) + " is outside the voice's " +
                        std::to_string(hp.num_symbols) + " symbols");
}

VitsEncoding VitsTextToLatent::encode(std::span<const std::int64_t> ids) const {
    check_phoneme_ids(w_->hp, ids);
    const Network net(*w_, ffn_);
    const Signal enc = net.text_encoder(ids);
    const Signal stats = conv1d(enc, net.conv("enc_p.proj"), 1, 0, 0);
    VitsEncoding e;
    e.phonemes = enc.t;
    e.hidden.assign(enc.v.begin(), enc.v.end());
    e.stats.assign(stats.v.begin(), stats.v.end());
    return e;
}

int VitsTextToLatent::duration_reach() const {
    return Network(*w_, {}).duration_reach();
}

namespace {

void check_scales(const VitsScales& scales) {
    const auto finite_at_least = [](float v, float low) { return std::isfinite(v) && v >= low; };
    if (!finite_at_least(scales.noise_scale, 0) || !finite_at_least(scales.noise_w, 0))
        throw Error("VITS: noise_scale and noise_w must be finite and not negative");
    if (!finite_at_least(scales.length_scale, 0) || scales.length_scale == 0)
        throw Error("VITS: length_scale must be finite and positive");
}

}  // namespace

void VitsTextToLatent::check_arguments(std::span<const std::int64_t> ids, int speaker,
                                       const VitsScales& scales) const {
    check_phoneme_ids(w_->hp, ids);
    check_scales(scales);
    speaker_vector(speaker);  // refuses a speaker out of range before the encoder runs
}

std::vector<double> VitsTextToLatent::duration_noise(int phonemes, const VitsScales& scales,
                                                     std::mt19937_64& noise) {
    return Network::duration_noise(phonemes, scales.noise_w, noise).v;
}

// The text encoder's output, in the host's double precision.
struct VitsTextToLatent::EncodedSentence {
    Signal enc, stats;
};

VitsPrior VitsTextToLatent::prior(std::span<const std::int64_t> ids, int speaker,
                                  const VitsScales& scales, std::mt19937_64& noise,
                                  PriorDurations staging) const {
    check_arguments(ids, speaker, scales);
    const Network net(*w_, ffn_);
    EncodedSentence e;
    e.enc = net.text_encoder(ids);
    e.stats = conv1d(e.enc, net.conv("enc_p.proj"), 1, 0, 0);
    return prior_of(std::move(e), speaker, scales, noise, staging);
}

VitsTextToLatent::EncodedSentence VitsTextToLatent::checked(const VitsEncoding& encoding,
                                                            const VitsScales& scales) const {
    const auto& hp = w_->hp;
    const int n = encoding.phonemes;
    if (n <= 0 || encoding.hidden.size() != std::size_t(hp.hidden_channels) * std::size_t(n) ||
        encoding.stats.size() != std::size_t(2 * hp.inter_channels) * std::size_t(n))
        throw Error("VITS: an encoding of " + std::to_string(n) + " phonemes needs " +
                    std::to_string(hp.hidden_channels) + " hidden and " +
                    std::to_string(2 * hp.inter_channels) + " stats channels per phoneme; it has " +
                    std::to_string(encoding.hidden.size()) + " and " +
                    std::to_string(encoding.stats.size()) + " values");
    check_scales(scales);
    EncodedSentence e;
    e.enc = Signal(hp.hidden_channels, n);
    e.enc.v.assign(encoding.hidden.begin(), encoding.hidden.end());
    e.stats = Signal(2 * hp.inter_channels, n);
    e.stats.v.assign(encoding.stats.begin(), encoding.stats.end());
    return e;
}

VitsPrior VitsTextToLatent::prior(const VitsEncoding& encoding, int speaker,
                                  const VitsScales& scales, std::mt19937_64& noise,
                                  PriorDurations staging) const {
    return prior_of(checked(encoding, scales), speaker, scales, noise, staging);
}

VitsPrior VitsTextToLatent::prior(const VitsEncoding& encoding, int speaker,
                                  const VitsScales& scales, std::mt19937_64& noise,
                                  const VitsLogDurations& log_durations) const {
    speaker_vector(speaker);  // refuses a speaker out of range before the device runs
    return prior_of(checked(encoding, scales), speaker, scales, noise, PriorDurations::Whole,
                    &encoding, log_durations ? &log_durations : nullptr);
}

// Whether a phoneme's frames, exp(logw) * length_scale, lie within
// kDurationTieMargin of a whole number (0 aside: the ceiling of anything
// positive there is 1), or are no number at all (a device gone wrong).
bool VitsTextToLatent::near_a_duration_tie(std::span<const double> logw, double length_scale) {
    for (double l : logw) {
        if (std::isnan(l)) return true;
        const double d = std::exp(l) * length_scale, whole = std::round(d);
        if (whole > 0 && std::fabs(d - whole) <= kDurationTieMargin * whole) return true;
    }
    return false;
}

VitsPrior VitsTextToLatent::prior_of(EncodedSentence&& e, int speaker, const VitsScales& scales,
                                     std::mt19937_64& noise, PriorDurations staging,
                                     const VitsEncoding* encoding,
                                     const VitsLogDurations* log_durations) const {
    const auto& hp = w_->hp;
    std::vector<double> g = speaker_vector(speaker);
    const Network net(*w_, ffn_);
    const std::vector<double>* gp = g.empty() ? nullptr : &g;
    Signal enc = std::move(e.enc);
    Signal stats = std::move(e.stats);
    const int phonemes = enc.t;
    Signal dp_noise = Network::duration_noise(phonemes, scales.noise_w, noise);
    const double length_scale = scales.length_scale;

    // Staged: the predictor over the first phonemes and its reach beyond
    // them, whose durations are exact for those phonemes.
    const int known = kStagedPhonemes, window = known + net.duration_reach();
    const bool staged = staging == PriorDurations::Staged && phonemes > window;
    std::vector<int> durations;
    int total = 0;
    if (staged) {
        const std::vector<double> logw =
            net.log_durations(columns(enc, 0, window), gp, columns(dp_noise, 0, window));
        total = append_durations(logw, 0, known, length_scale, durations);
    } else {
        std::vector<double> logw;
        if (log_durations && encoding) {
            logw = (*log_durations)(*encoding, dp_noise.v);
            if (!logw.empty() && logw.size() != std::size_t(phonemes))
                throw std::logic_error("VITS: " + std::to_string(logw.size()) +
                                       " log durations made elsewhere for " +
                                       std::to_string(phonemes) + " phonemes");
            if (near_a_duration_tie(logw, length_scale)) logw.clear();  // the host decides
        }
        if (logw.empty()) logw = net.log_durations(enc, gp, dp_noise);
        total = append_durations(logw, 0, phonemes, length_scale, durations);
    }
    check_total(total);
    VitsPrior prior(hp.inter_channels, std::move(stats.v), std::move(durations),
                    staged ? total : std::max(total, 1), double(scales.noise_scale), noise());
    if (staged) {
        auto pending = std::make_shared<VitsPrior::PendingDurations>();
        pending->weights = w_;
        pending->enc = std::move(enc);
        pending->noise = std::move(dp_noise);
        pending->speaker = std::move(g);
        pending->length_scale = length_scale;
        prior.pending_ = std::move(pending);
        // A sentence whose first phonemes already promise more frames than
        // the limit (an absurd length_scale) is refused here, before any of
        // it is heard.
        if (static_cast<double>(total) / known * phonemes > kMaxFrames) prior.complete_durations();
    }
    return prior;
}

}  // namespace etude::engine
