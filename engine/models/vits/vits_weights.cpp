#include "engine/models/vits/vits_weights.h"

#include <cmath>
#include <sstream>

#include "engine/error.h"

namespace etude::engine {

namespace {

std::string shape_text(const std::vector<std::int64_t>& dims) {
    std::ostringstream s;
    s << '[';
    for (std::size_t i = 0; i < dims.size(); ++i) s << (i ? "," : "") << dims[i];
    s << ']';
    return s.str();
}

// One use of a weight in the graph: a convolution (weight and optional
// bias), an embedding lookup, or an element-wise op with a constant of more
// than one value (layer-norm gains, relative-position tables, affine terms).
struct Use {
    const OnnxNode* node = nullptr;
    const OnnxTensor* weight = nullptr;
    const OnnxTensor* bias = nullptr;
    std::string weight_name, bias_name;
};

class StructureReader {
  public:
    explicit StructureReader(const OnnxGraph& g) : g_(g) { collect(); }

    VitsWeights read() {
        out_.opset = int(g_.opset());
        out_.producer = g_.producer();
        check_interface();
        read_text_encoder();
        read_speaker_embedding();
        read_duration_predictor();
        read_flow();
        read_decoder();
        // The network keeps every sequence's length only with odd kernels
        // where it pads symmetrically; anything else would read past the ends.
        const auto& hp = out_.hp;
        for (auto [k, what] : {std::pair{hp.dp_kernel, "duration predictor kernel"},
                               std::pair{hp.wn_kernel, "flow WaveNet kernel"}})
            if (k % 2 == 0)
                fail(std::string("the ") + what + " is " + std::to_string(k) + ", not odd");
        if (hp.ffn_kernel < 1) fail("the feed-forward kernel is empty");
        if (pos_ != uses_.size())
            fail("after the decoder's last convolution the graph still uses weights (" +
                 describe(uses_[pos_]) + ")");
        check_activations();
        return std::move(out_);
    }

  private:
    const OnnxGraph& g_;
    std::vector<Use> uses_;
    std::size_t pos_ = 0;
    VitsWeights out_;

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(g_.label() + ": not a Piper VITS graph this engine supports: " + what);
    }

    // A weight that is NaN or infinite would turn every sample it touches
    // into noise or silence without a word (ONNX files carry no checksum, so
    // a damaged one still parses): refused here, naming the weight.
    void check_finite(const VitsTensor& t) const {
        for (std::size_t i = 0; i < t.values.size(); ++i)
            if (!std::isfinite(t.values[i]))
                throw Error(g_.label() + ": weight '" + t.source + "'" +
                            (t.role != t.source ? " (" + t.role + ")" : std::string()) + " holds " +
                            (std::isnan(t.values[i]) ? "NaN" : "an infinity") + " at element " +
                            std::to_string(i) + ": the file is damaged");
    }

    const OnnxTensor* float_constant(const std::string& value) const {
        const OnnxTensor* t = value.empty() ? nullptr : g_.constant(value);
        return t && t->is_float() ? t : nullptr;
    }

    void collect() {
        for (const OnnxNode& n : g_.nodes()) {
            if (n.op_type == "Constant") continue;
            if (n.op_type == "Conv" || n.op_type == "ConvTranspose") {
                Use u{&n};
                if (n.inputs.size() < 2 || !(u.weight = float_constant(n.inputs[1])))
                    fail(n.op_type + " node '" + n.name +
                         "' computes its weights in the graph (weight norm not folded?)");
                if (u.weight->dims.size() != 3 || u.weight->elements() == 0)
                    fail(n.op_type + " node '" + n.name + "' has a weight of " +
                         shape_text(u.weight->dims) + ", not a non-empty 1-D convolution kernel");
                u.weight_name = n.inputs[1];
                if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
                    if (!(u.bias = float_constant(n.inputs[2])))
                        fail(n.op_type + " node '" + n.name + "' computes its bias in the graph");
                    u.bias_name = n.inputs[2];
                }
                uses_.push_back(u);
                continue;
            }
            for (const auto& in : n.inputs) {
                const OnnxTensor* t = float_constant(in);
                if (t && t->elements() >= 2) {
                    Use u{&n, t};
                    u.weight_name = in;
                    uses_.push_back(u);
                }
            }
        }
    }

    static std::string describe(const Use& u) {
        std::string s = u.node->op_type + " with " + shape_text(u.weight->dims);
        if (!u.node->name.empty()) s += " (node " + u.node->name + ")";
        return s;
    }

    const Use* peek(std::size_t ahead = 0) const {
        return pos_ + ahead < uses_.size() ? &uses_[pos_ + ahead] : nullptr;
    }

    static bool dims_match(const std::vector<std::int64_t>& have,
                           const std::vector<std::int64_t>& want) {
        if (have.size() != want.size()) return false;
        for (std::size_t i = 0; i < have.size(); ++i)
            if (want[i] >= 0 && have[i] != want[i]) return false;
        return true;
    }

    bool next_is(const char* op, const std::vector<std::int64_t>& dims,
                 std::size_t ahead = 0) const {
        const Use* u = peek(ahead);
        return u && u->node->op_type == op && dims_match(u->weight->dims, dims);
    }

    void store(const std::string& role, const std::string& source, const OnnxTensor& t) {
        out_.tensors.push_back({role, source, t.dims, t.floats});
        check_finite(out_.tensors.back());
    }

    // Takes the next use, which must be `op` with a weight of `dims` (-1: any
    // size), and files its weight (and bias) under `role`.
    const Use& take(const std::string& role, const std::string& what, const char* op,
                    const std::vector<std::int64_t>& dims, bool with_bias) {
        const Use* u = peek();
        std::string wanted = std::string(op) + " with " + shape_text(dims);
        if (!u) fail("expected " + what + " (" + wanted + "); the graph ends first");
        if (u->node->op_type != op || !dims_match(u->weight->dims, dims))
            fail("expected " + what + " (" + wanted + "), found " + describe(*u));
        const bool is_conv = u->node->op_type == "Conv" || u->node->op_type == "ConvTranspose";
        if (is_conv && with_bias != (u->bias != nullptr))
            fail(what + " should " + (with_bias ? "" : "not ") + "have a bias (" + describe(*u) +
                 ")");
        if (is_conv) {
            store(role + ".weight", u->weight_name, *u->weight);
            if (u->bias) {
                if (u->bias->dims !=
                    std::vector<std::int64_t>{u->weight->dims[op == std::string("Conv") ? 0 : 1]})
                    fail(what + " has a bias of " + shape_text(u->bias->dims));
                store(role + ".bias", u->bias_name, *u->bias);
            }
        } else {
            store(role, u->weight_name, *u->weight);
        }
        ++pos_;
        return *u;
    }

    const Use& conv(const std::string& role, const std::string& what,
                    const std::vector<std::int64_t>& dims, bool with_bias = true) {
        return take(role, what, "Conv", dims, with_bias);
    }

    void layer_norm(const std::string& role, const std::string& what, std::int64_t channels) {
        take(role + ".gamma", what + " gain", "Mul", {channels}, false);
        take(role + ".beta", what + " offset", "Add", {channels}, false);
    }

    static int attr_int(const OnnxNode& n, const char* name, int fallback) {
        const OnnxAttribute* a = n.attribute(name);
        if (!a) return fallback;
        if (!a->ints.empty()) return int(a->ints[0]);
        return int(a->i);
    }

    // ---- interface ------------------------------------------------------

    void check_interface() {
        std::vector<std::string> names;
        for (const auto& v : g_.inputs()) names.push_back(v.name);
        const std::vector<std::string> single{"input", "input_lengths", "scales"};
        const std::vector<std::string> multi{"input", "input_lengths", "scales", "sid"};
        if (names != single && names != multi) {
            std::string have;
            for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
            fail("its inputs are (" + have +
                 "); a Piper voice has (input, input_lengths, scales) and, with several speakers, "
                 "sid");
        }
        if (g_.outputs().size() != 1 || g_.outputs()[0].name != "output")
            fail("a Piper voice has one output named 'output'");
        out_.hp.num_speakers = names == multi ? 2 : 1;  // the real count comes with emb_g
    }

    // ---- text encoder ---------------------------------------------------

    void read_text_encoder() {
        auto& hp = out_.hp;
        const Use* first = peek();
        if (!first || first->node->op_type != "Gather" || first->node->inputs.size() < 2 ||
            first->node->inputs[1] != "input" || first->weight->dims.size() != 2)
            fail(
                "the first weight the graph uses should be the phoneme embedding, a Gather "
                "of 'input' from a [symbols, channels] table" +
                std::string(first ? "; found " + describe(*first) : ""));
        hp.num_symbols = int(first->weight->dims[0]);
        hp.hidden_channels = int(first->weight->dims[1]);
        const std::int64_t h = hp.hidden_channels;
        take("enc_p.emb.weight", "the phoneme embedding", "Gather", {-1, h}, false);

        for (int l = 0; next_is("Conv", {h, h, 1}) && next_is("Conv", {h, h, 1}, 1); ++l) {
            const std::string a = "enc_p.encoder.attn_layers." + std::to_string(l);
            const std::string what = "text encoder layer " + std::to_string(l);
            conv(a + ".conv_q", what + " query", {h, h, 1});
            conv(a + ".conv_k", what + " key", {h, h, 1});
            conv(a + ".conv_v", what + " value", {h, h, 1});
            const Use* rel = peek();
            if (!rel || rel->node->op_type != "Pad" || rel->weight->dims.size() != 3 ||
                rel->weight->dims[0] != 1 || rel->weight->dims[1] % 2 != 1 ||
                h % rel->weight->dims[2] != 0)
                fail("expected " + what +
                     "'s relative-position key table (Pad of [1, 2*window+1, "
                     "channels/heads])" +
                     (rel ? ", found " + describe(*rel) : std::string()));
            const int window = int(rel->weight->dims[1] / 2);
            const int heads = int(h / rel->weight->dims[2]);
            if (l == 0) {
                hp.window = window;
                hp.n_heads = heads;
            } else if (window != hp.window || heads != hp.n_heads) {
                fail(what + " has a different attention window or head count from layer 0");
            }
            const std::vector<std::int64_t> rel_dims{1, 2 * hp.window + 1, h / hp.n_heads};
            take(a + ".emb_rel_k", what + " relative-position keys", "Pad", rel_dims, false);
            take(a + ".emb_rel_v", what + " relative-position values", "Pad", rel_dims, false);
            conv(a + ".conv_o", what + " output", {h, h, 1});
            layer_norm("enc_p.encoder.norm_layers_1." + std::to_string(l), what + " first norm", h);
            const std::string f = "enc_p.encoder.ffn_layers." + std::to_string(l);
            const Use* c1 = peek();
            if (l == 0 && c1 && c1->node->op_type == "Conv" && c1->weight->dims.size() == 3) {
                hp.filter_channels = int(c1->weight->dims[0]);
                hp.ffn_kernel = int(c1->weight->dims[2]);
            }
            const std::int64_t fc = hp.filter_channels, k = hp.ffn_kernel;
            conv(f + ".conv_1", what + " feed-forward in", {fc, h, k});
            conv(f + ".conv_2", what + " feed-forward out", {h, fc, k});
            layer_norm("enc_p.encoder.norm_layers_2." + std::to_string(l), what + " second norm",
                       h);
            hp.n_layers = l + 1;
        }
        if (hp.n_layers == 0) fail("the text encoder has no transformer layers");
        const Use* proj = peek();
        if (!proj || proj->weight->dims.size() != 3 || proj->weight->dims[0] % 2)
            fail(
                "expected the text encoder's projection to mean and log-scale (Conv with "
                "[2*inter, " +
                std::to_string(h) + ", 1])" +
                (proj ? ", found " + describe(*proj) : std::string()));
        hp.inter_channels = int(proj->weight->dims[0] / 2);
        if (hp.inter_channels % 2)
            fail("the latent has " + std::to_string(hp.inter_channels) +
                 " channels; the flow splits it in halves, so it must be even");
        conv("enc_p.proj", "the text encoder's projection", {2 * hp.inter_channels, h, 1});
    }

    void read_speaker_embedding() {
        auto& hp = out_.hp;
        const Use* u = peek();
        const bool gather_sid = u && u->node->op_type == "Gather" && u->node->inputs.size() > 1 &&
                                u->node->inputs[1] == "sid";
        if (hp.num_speakers == 1) {
            if (gather_sid) fail("it looks up a speaker embedding but has no 'sid' input");
            return;
        }
        if (!gather_sid || u->weight->dims.size() != 2)
            fail(
                "it has a 'sid' input but no speaker embedding (a Gather of 'sid' from a "
                "[speakers, channels] table) after the text encoder");
        hp.num_speakers = int(u->weight->dims[0]);
        hp.gin_channels = int(u->weight->dims[1]);
        take("emb_g.weight", "the speaker embedding", "Gather", {-1, -1}, false);
    }

    // ---- stochastic duration predictor (reverse) ------------------------

    void dds_conv(const std::string& role, const std::string& what, std::int64_t channels) {
        auto& hp = out_.hp;
        for (int i = 0; i < 3; ++i) {
            const std::string n = std::to_string(i);
            const Use* sep = peek();
            if (i == 0 && hp.dp_kernel == 0 && sep && sep->weight->dims.size() == 3)
                hp.dp_kernel = int(sep->weight->dims[2]);
            const Use& s = conv(role + ".convs_sep." + n, what + " depthwise conv " + n,
                                {channels, 1, hp.dp_kernel});
            int dilation = 1;
            for (int j = 0; j < i; ++j) dilation *= hp.dp_kernel;
            if (attr_int(*s.node, "group", 1) != channels ||
                attr_int(*s.node, "dilations", 1) != dilation)
                fail(what + " depthwise conv " + n + " should have " + std::to_string(channels) +
                     " groups and dilation " + std::to_string(dilation));
            layer_norm(role + ".norms_1." + n, what + " norm", channels);
            conv(role + ".convs_1x1." + n, what + " pointwise conv " + n, {channels, channels, 1});
            layer_norm(role + ".norms_2." + n, what + " norm", channels);
        }
    }

    void read_duration_predictor() {
        auto& hp = out_.hp;
        const std::int64_t h = hp.hidden_channels;
        conv("dp.pre", "the duration predictor's input conv", {h, h, 1});
        if (hp.gin_channels)
            conv("dp.cond", "the duration predictor's speaker conv", {h, hp.gin_channels, 1});
        dds_conv("dp.convs", "the duration predictor's", h);
        conv("dp.proj", "the duration predictor's projection", {h, h, 1});
        // Piper builds ElementwiseAffine then 4 (ConvFlow, Flip) pairs at
        // flows.0..8 and runs them in reverse without flows.1: 7, 5, 3.
        int f = 0;
        for (; next_is("Conv", {h, 1, 1}); ++f) {
            const std::string role = "dp.flows." + std::to_string(7 - 2 * f);
            const std::string what = "duration flow " + std::to_string(f);
            conv(role + ".pre", what + " input conv", {h, 1, 1});
            dds_conv(role + ".convs", what, h);
            const Use* p = peek();
            if (f == 0 && p && p->weight->dims.size() == 3) {
                if ((p->weight->dims[0] + 1) % 3) fail(what + "'s projection is not 3*bins-1 wide");
                hp.spline_bins = int((p->weight->dims[0] + 1) / 3);
            }
            conv(role + ".proj", what + " spline projection", {3 * hp.spline_bins - 1, h, 1});
        }
        if (f == 0) fail("the duration predictor has no spline flows");
        hp.dp_flows = f;
        take("dp.flows.0.m", "the duration flow's affine shift", "Sub", {2, 1}, false);
        // exp(-logs): folded by torch 2 into a constant the Mul uses, left by
        // torch 1.13 as Exp of a folded -logs.
        const Use* scale = peek();
        if (scale && scale->node->op_type == "Exp" && dims_match(scale->weight->dims, {2, 1})) {
            VitsTensor t{
                "dp.flows.0.exp_neg_logs", scale->weight_name, {2, 1}, scale->weight->floats};
            for (float& v : t.values) v = std::exp(v);
            check_finite(t);
            out_.tensors.push_back(std::move(t));
            ++pos_;
        } else {
            take("dp.flows.0.exp_neg_logs", "the duration flow's affine scale", "Mul", {2, 1},
                 false);
        }
    }

    // ---- residual-coupling flow (reverse) -------------------------------

    void read_flow() {
        auto& hp = out_.hp;
        const std::int64_t half = hp.inter_channels / 2;
        const Use* first = peek();
        if (!first || first->weight->dims.size() != 3 || first->weight->dims[1] != half)
            fail("expected the flow's first coupling input conv (Conv with [hidden, " +
                 std::to_string(half) + ", 1])" +
                 (first ? ", found " + describe(*first) : std::string()));
        const std::int64_t hid = first->weight->dims[0];
        if (hid != hp.hidden_channels) fail("the flow's width differs from the text encoder's");
        // Couplings come in the graph in reverse order (flows.6, 4, 2, 0);
        // their count is known only at the end, so the roles are renamed then.
        int c = 0;
        std::vector<std::size_t> starts;
        while (next_is("Conv", {hid, half, 1})) {
            starts.push_back(out_.tensors.size());
            const std::string role = "#" + std::to_string(c);
            const std::string what = "flow coupling " + std::to_string(c);
            conv(role + ".pre", what + " input conv", {hid, half, 1});
            if (hp.gin_channels) {
                const Use* cond = peek();
                const std::int64_t width =
                    cond && cond->weight->dims.size() == 3 ? cond->weight->dims[0] : 0;
                if (width % (2 * hid))
                    fail(what + "'s speaker conv is not a multiple of 2*hidden wide");
                conv(role + ".enc.cond_layer", what + " speaker conv", {width, hp.gin_channels, 1});
            }
            int l = 0;
            for (;; ++l) {
                const std::string n = std::to_string(l);
                const Use* in = peek();
                if (c == 0 && l == 0 && in && in->weight->dims.size() == 3)
                    hp.wn_kernel = int(in->weight->dims[2]);
                const Use& inl = conv(role + ".enc.in_layers." + n, what + " WaveNet layer " + n,
                                      {2 * hid, hid, hp.wn_kernel});
                if (attr_int(*inl.node, "dilations", 1) != 1)
                    fail(what + " WaveNet layer " + n +
                         " should not be dilated (Piper's dilation rate is 1)");
                if (next_is("Conv", {2 * hid, hid, 1})) {
                    conv(role + ".enc.res_skip_layers." + n, what + " residual/skip conv " + n,
                         {2 * hid, hid, 1});
                } else {
                    conv(role + ".enc.res_skip_layers." + n, what + " last skip conv",
                         {hid, hid, 1});
                    break;
                }
            }
            if (c == 0)
                hp.wn_layers = l + 1;
            else if (l + 1 != hp.wn_layers)
                fail(what + " has a different WaveNet depth from coupling 0");
            if (hp.gin_channels &&
                out_.tensors[starts.back() + 2].dims[0] != 2 * hid * hp.wn_layers)
                fail(what + "'s speaker conv width does not match its WaveNet depth");
            conv(role + ".post", what + " output conv (mean only)", {half, hid, 1});
            ++c;
        }
        hp.flow_couplings = c;
        for (int k = 0; k < c; ++k) {
            const std::string from = "#" + std::to_string(k);
            const std::string to = "flow.flows." + std::to_string(2 * (c - 1 - k));
            const std::size_t end = k + 1 < c ? starts[k + 1] : out_.tensors.size();
            for (std::size_t t = starts[k]; t < end; ++t)
                out_.tensors[t].role = to + out_.tensors[t].role.substr(from.size());
        }
    }

    // ---- HiFi-GAN decoder -----------------------------------------------

    void read_decoder() {
        auto& hp = out_.hp;
        const Use* pre = peek();
        if (!pre || pre->node->op_type != "Conv" || pre->weight->dims.size() != 3 ||
            pre->weight->dims[1] != hp.inter_channels)
            fail("expected the decoder's input conv (Conv with [channels, " +
                 std::to_string(hp.inter_channels) + ", 7])" +
                 (pre ? ", found " + describe(*pre) : std::string()));
        hp.upsample_initial_channel = int(pre->weight->dims[0]);
        std::int64_t ch = hp.upsample_initial_channel;
        conv("dec.conv_pre", "the decoder's input conv",
             {ch, hp.inter_channels, pre->weight->dims[2]});
        if (hp.gin_channels)
            conv("dec.cond", "the decoder's speaker conv", {ch, hp.gin_channels, 1});

        int block = 0;
        for (int i = 0; next_is("ConvTranspose", {ch, ch / 2, -1}); ++i) {
            const std::string n = std::to_string(i);
            const Use& up =
                take("dec.ups." + n, "upsampler " + n, "ConvTranspose", {ch, ch / 2, -1}, true);
            const int stride = attr_int(*up.node, "strides", 1);
            const int kernel = int(up.weight->dims[2]);
            if (attr_int(*up.node, "pads", -1) != (kernel - stride) / 2)
                fail("upsampler " + n + " should be padded by (kernel - stride) / 2");
            hp.upsample_rates.push_back(stride);
            hp.upsample_kernels.push_back(kernel);
            ch /= 2;
            // Residual blocks: runs of convolutions of one kernel size.
            std::vector<int> kernels;
            std::vector<std::vector<int>> dilations;
            while (next_is("Conv", {ch, ch, -1})) {
                const int k = int(peek()->weight->dims[2]);
                std::vector<const OnnxNode*> run;
                while (next_is("Conv", {ch, ch, k})) {
                    run.push_back(peek()->node);
                    ++pos_;
                }
                pos_ -= run.size();
                // ResBlock1 is (dilated conv, undilated conv) pairs, three
                // or more; ResBlock2 a few dilated convs. The first run decides.
                if (i == 0 && kernels.empty()) {
                    bool pairs = run.size() >= 4 && run.size() % 2 == 0;
                    for (std::size_t j = 1; pairs && j < run.size(); j += 2)
                        pairs = attr_int(*run[j], "dilations", 1) == 1;
                    hp.resblock = pairs ? '1' : '2';
                }
                std::vector<int> d;
                const std::string r = "dec.resblocks." + std::to_string(block);
                if (hp.resblock == '1') {
                    if (run.size() % 2)
                        fail("residual block " + std::to_string(block) +
                             " has an odd number of convolutions");
                    for (std::size_t j = 0; j < run.size() / 2; ++j) {
                        d.push_back(attr_int(*run[2 * j], "dilations", 1));
                        conv(r + ".convs1." + std::to_string(j),
                             "residual block " + std::to_string(block), {ch, ch, k});
                        conv(r + ".convs2." + std::to_string(j),
                             "residual block " + std::to_string(block), {ch, ch, k});
                    }
                } else {
                    for (std::size_t j = 0; j < run.size(); ++j) {
                        d.push_back(attr_int(*run[j], "dilations", 1));
                        conv(r + ".convs." + std::to_string(j),
                             "residual block " + std::to_string(block), {ch, ch, k});
                    }
                }
                kernels.push_back(k);
                dilations.push_back(d);
                ++block;
            }
            if (i == 0) {
                hp.resblock_kernels = kernels;
                hp.resblock_dilations = dilations;
            } else if (kernels != hp.resblock_kernels || dilations != hp.resblock_dilations) {
                fail("upsampler " + n + "'s residual blocks differ from the first upsampler's");
            }
            if (kernels.empty()) fail("upsampler " + n + " has no residual blocks");
        }
        if (hp.upsample_rates.empty()) fail("the decoder has no upsamplers");
        conv("dec.conv_post", "the decoder's output conv", {1, ch, -1}, false);
    }

    // The decoder's leaky ReLUs: 0.1 everywhere but the last, which is
    // PyTorch's default 0.01. A graph with other slopes is another network.
    void check_activations() {
        std::vector<float> alphas;
        for (const OnnxNode& n : g_.nodes())
            if (n.op_type == "LeakyRelu") {
                const OnnxAttribute* a = n.attribute("alpha");
                alphas.push_back(a ? a->f : 0.01f);
            }
        if (alphas.empty() || std::fabs(alphas.back() - 0.01f) > 1e-7f)
            fail("the decoder's last leaky ReLU should have slope 0.01");
        for (std::size_t i = 0; i + 1 < alphas.size(); ++i)
            if (std::fabs(alphas[i] - 0.1f) > 1e-7f)
                fail("a decoder leaky ReLU has slope " + std::to_string(alphas[i]) + ", not 0.1");
    }
};

}  // namespace

int VitsHyperparameters::hop() const {
    int h = 1;
    for (int r : upsample_rates) h *= r;
    return h;
}

const VitsTensor* VitsWeights::find(const std::string& role) const {
    for (const auto& t : tensors)
        if (t.role == role) return &t;
    return nullptr;
}

const VitsTensor& VitsWeights::get(const std::string& role) const {
    const VitsTensor* t = find(role);
    if (!t) throw Error("VITS weights: no tensor '" + role + "'");
    if (t->released)
        throw Error("VITS weights: '" + role +
                    "' was released once the part that runs it made its own copy");
    return *t;
}

void VitsWeights::release(const std::string& prefix) {
    for (auto& t : tensors)
        if (t.role.compare(0, prefix.size(), prefix) == 0) {
            std::vector<float>().swap(t.values);  // clear() would keep the capacity
            t.released = true;
        }
}

std::size_t VitsWeights::held_floats() const {
    std::size_t n = 0;
    for (const auto& t : tensors) n += t.values.size();
    return n;
}

VitsWeights read_vits_weights(const OnnxGraph& graph) {
    return StructureReader(graph).read();
}

VitsWeights read_vits_weights(const std::string& onnx_path) {
    return read_vits_weights(OnnxGraph::load(onnx_path));
}

}  // namespace etude::engine
