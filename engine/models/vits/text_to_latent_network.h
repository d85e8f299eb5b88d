// The text-to-latent network's parts on the host, over one voice's weights:
// the text encoder (text_encoder.cpp), the stochastic duration predictor in
// reverse (duration_predictor.cpp) and the residual-coupling flow in
// reverse (text_to_latent.cpp, beside the VitsTextToLatent calls that use
// them). Internal to engine/models/vits/; VitsTextToLatent is the API.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/models/vits/text_to_latent_ops.h"
#include "engine/models/vits/vits_weights.h"
#include "engine/models/vits/winograd_conv3.h"

namespace etude::engine::vits_host {

class TextToLatentNetwork {
  public:
    // ffn: each encoder layer's two feed-forward convolutions for Winograd
    // (conv_1 then conv_2, layer by layer), or empty to run them directly.
    TextToLatentNetwork(const VitsWeights& w, std::span<const WinogradConv3> ffn)
        : w_(w), hp_(w.hp), ffn_(ffn) {}

    Conv conv(const std::string& role, bool bias = true) const {
        return {&w_.get(role + ".weight"), bias ? &w_.get(role + ".bias") : nullptr};
    }
    const VitsTensor& t(const std::string& role) const { return w_.get(role); }

    // ---- text encoder (text_encoder.cpp) ----

    Signal attention(const Signal& x, const std::string& a) const;
    // The feed-forward block directly, and through Winograd's F(2, 3).
    Signal feed_forward(const Signal& x, const std::string& f) const;
    Signal feed_forward(const Signal& x, const WinogradConv3& c1, const WinogradConv3& c2) const;
    Signal text_encoder(std::span<const std::int64_t> ids) const;

    // ---- duration predictor (duration_predictor.cpp) ----

    void dds(Signal& x, const std::string& r) const;
    int duration_reach() const;
    static double inverse_spline(double x, const double* uw, const double* uh, const double* ud,
                                 int bins);
    static Signal duration_noise(int length, double noise_w, std::mt19937_64& rng);
    std::vector<double> log_durations(const Signal& enc, const std::vector<double>* g,
                                      Signal z) const;
    void add_speaker(Signal& x, const std::string& role, const std::vector<double>& g) const;

    // ---- flow in reverse (text_to_latent.cpp) ----

    void flow(Signal& z, const std::vector<double>* g) const;

  private:
    const VitsWeights& w_;
    const VitsHyperparameters& hp_;
    std::span<const WinogradConv3> ffn_;
};

}  // namespace etude::engine::vits_host
