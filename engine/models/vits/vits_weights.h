// A Piper voice's weights, taken from its ONNX graph by structure.
//
// Piper exports VITS with torch.onnx.export, which names most weights after
// the PyTorch modules but not all: the flow's weight-normed convolutions
// become anonymous constants (`onnx::Conv_NNNN`), the text embedding of a
// single-speaker voice is named `sid` (the exporter's spare input name), and
// folded constants (the duration flow's exp(-logs)) are named after the
// node that made them, differently by torch version. So nothing here looks
// at a weight's name: the graph's nodes are followed in order, and each
// weight is recognised by the operation that uses it and its shape, in the
// order Piper's inference runs them (text encoder, speaker embedding,
// duration predictor, flow in reverse, decoder). The shapes give the
// hyperparameters; anything that does not fit is refused with one line
// saying what was expected and what was found.
//
// Each tensor gets the name Piper's state dict gives it (`role`), e.g.
// "flow.flows.6.enc.in_layers.0.weight", and keeps the graph's own name
// (`source`) for diagnostics and tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/models/vits/onnx_graph.h"

namespace etude::engine {

struct VitsHyperparameters {
    int num_symbols = 0;
    int hidden_channels = 0;  // text encoder, duration predictor, flow's WaveNets
    int filter_channels = 0;  // text encoder's feed-forward
    int inter_channels = 0;   // latent (prior, flow, decoder input)
    int n_heads = 0;
    int n_layers = 0;  // transformer layers
    int window = 0;    // relative attention reaches -window..window
    int ffn_kernel = 0;
    int dp_kernel = 0;    // duration predictor's depthwise convolutions
    int dp_flows = 0;     // spline flows run at inference (Piper: 3 of its 4)
    int spline_bins = 0;  // rational-quadratic spline bins
    int flow_couplings = 0;
    int wn_layers = 0;  // WaveNet layers per coupling
    int wn_kernel = 0;
    int num_speakers = 1;  // > 1 when the graph has a `sid` input
    int gin_channels = 0;  // speaker embedding width (0: single speaker)
    char resblock = '2';   // HiFi-GAN ResBlock1 ('1') or ResBlock2 ('2')
    int upsample_initial_channel = 0;
    std::vector<int> upsample_rates;
    std::vector<int> upsample_kernels;
    std::vector<int> resblock_kernels;
    std::vector<std::vector<int>> resblock_dilations;

    int hop() const;  // samples per frame: the product of the upsample rates
};

struct VitsTensor {
    std::string role;    // Piper's state-dict name
    std::string source;  // the graph's name for it
    std::vector<std::int64_t> dims;
    std::vector<float> values;  // empty once released (VitsWeights::release)
    bool released = false;
};

struct VitsWeights {
    VitsHyperparameters hp;
    std::vector<VitsTensor> tensors;  // in the order inference uses them
    int opset = 0;
    std::string producer;  // e.g. "pytorch 2.0.0"

    // Throws etude::Error when absent (a bug: the reader checked them all)
    // or released (a bug: a part that copied it in its own form is the one
    // to use).
    const VitsTensor& get(const std::string& role) const;
    const VitsTensor* find(const std::string& role) const;

    // Frees the values of every tensor whose role starts with `prefix`:
    // a part of the voice that keeps its own copy (transformed for its
    // kernels, or on its backend) lets the original go, so that a loaded
    // voice holds each weight once. Their dims stay, for diagnostics.
    void release(const std::string& prefix);
    // The floats the tensors hold now (what release() has left).
    std::size_t held_floats() const;
};

// Throws etude::Error "<file>: ..." for an unreadable file or a graph that
// is not Piper's VITS.
VitsWeights read_vits_weights(const OnnxGraph& graph);
VitsWeights read_vits_weights(const std::string& onnx_path);

}  // namespace etude::engine
