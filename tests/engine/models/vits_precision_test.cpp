// Reduced precision is opt-in (gpu::MathPrecision, issue 41): a backend
// without it refuses it and stays in FP32, and where it exists (CUDA's TF32)
// a Piper voice's decoder output is measured against its own FP32 output in
// dB, each test voice, noise off.
//
// The bound, 30 dB, from the format rather than from a run: TF32 rounds
// each product's inputs to 11 significant bits (a relative error of at most
// 2^-11 each, about 1e-3 for a product), and a layer's sum of such
// products, errors of both signs, stays about 60 dB below its value; the
// decoder's ~30 layers add their errors' power (-15 dB), and what their
// nonlinearities amplify is given the rest. A mode that computed something
// else (a wrong operand, a lost bias) lands near 0 dB.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/models/vits/text_to_latent.h"
#include "engine/models/vits/vits_decoder.h"
#include "engine/models/vits/vits_weights.h"
#include "gpu/registry.h"
#include "support/model_parity.h"
#include "support/test_data.h"

namespace etude::engine {
namespace {

const std::string kData = test::test_data_dir() + "/piper/";

nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
}

// Signal to difference, in dB.
double snr_db(const std::vector<float>& ref, const std::vector<float>& test) {
    double signal = 0, noise = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        signal += double(ref[i]) * ref[i];
        const double d = double(ref[i]) - test[i];
        noise += d * d;
    }
    return noise == 0 ? INFINITY : 10.0 * std::log10(signal / noise);
}

// Puts a backend back in FP32 however the test ends: backends are shared
// within the process.
struct Fp32Again {
    gpu::Backend& backend;
    ~Fp32Again() { backend.set_math_precision(gpu::MathPrecision::Fp32); }
};

TEST(MathPrecision, a_backend_without_tf32_refuses_it_and_stays_in_fp32) {
    auto cpu = gpu::shared_cpu_backend();
    EXPECT_FALSE(cpu->set_math_precision(gpu::MathPrecision::Tf32));
    EXPECT_EQ(cpu->math_precision(), gpu::MathPrecision::Fp32);
    EXPECT_TRUE(cpu->set_math_precision(gpu::MathPrecision::Fp32));
    for (auto kind : {gpu::BackendKind::OpenCl, gpu::BackendKind::Vulkan}) {
        std::string why;
        auto b = test::backend_of(kind, why);
        if (!b) continue;
        EXPECT_FALSE(b->set_math_precision(gpu::MathPrecision::Tf32)) << gpu::to_string(kind);
        EXPECT_EQ(b->math_precision(), gpu::MathPrecision::Fp32) << gpu::to_string(kind);
    }
}

// The registry's setting (what --precision and Engine::Options set) reaches
// the devices opened before it and after it; those without TF32 stay FP32.
TEST(MathPrecision, the_registry_sets_every_device_opened_before_or_after) {
    auto& registry = gpu::DeviceRegistry::instance();
    struct RegistryFp32Again {
        gpu::DeviceRegistry& r;
        ~RegistryFp32Again() { r.set_math_precision(gpu::MathPrecision::Fp32); }
    } restore{registry};
    std::string why;
    auto before = test::backend_of(gpu::BackendKind::Vulkan, why);
    registry.set_math_precision(gpu::MathPrecision::Tf32);
    EXPECT_EQ(gpu::shared_cpu_backend()->math_precision(), gpu::MathPrecision::Fp32);
    if (before) {
        EXPECT_EQ(before->math_precision(), gpu::MathPrecision::Fp32);
    }
    auto cuda = test::backend_of(gpu::BackendKind::Cuda, why);
    if (!cuda) GTEST_SKIP() << "no CUDA device to take TF32: " << why;
    EXPECT_EQ(cuda->math_precision(), gpu::MathPrecision::Tf32);
    registry.set_math_precision(gpu::MathPrecision::Fp32);
    EXPECT_EQ(cuda->math_precision(), gpu::MathPrecision::Fp32);
    registry.set_math_precision(gpu::MathPrecision::Tf32);
    EXPECT_EQ(cuda->math_precision(), gpu::MathPrecision::Tf32);
}

TEST(MathPrecision, the_decoder_in_tf32_stays_within_30_db_of_fp32_on_cuda) {
    std::string why;
    auto backend = test::backend_of(gpu::BackendKind::Cuda, why);
    if (!backend) GTEST_SKIP() << why;
    ASSERT_TRUE(backend->set_math_precision(gpu::MathPrecision::Fp32));
    const Fp32Again restore{*backend};
    const auto ref = read_json(kData + "reference.json");
    const auto ids = ref["phoneme_ids"].get<std::vector<std::int64_t>>();
    for (const auto& [name, v] : ref["voices"].items()) {
        SCOPED_TRACE(name);
        const auto weights =
            std::make_shared<VitsWeights>(read_vits_weights(kData + name + ".onnx"));
        const int rate = read_json(kData + name + ".onnx.json")["audio"]["sample_rate"].get<int>();
        const int speaker = v["speaker_id"].is_null() ? 0 : v["speaker_id"].get<int>();
        const VitsTextToLatent prior(weights);
        std::mt19937_64 rng(1);
        const VitsLatent latent =
            prior.run(ids, speaker, {0.0f, v["length_scale"].get<float>(), 0.0f}, rng);
        auto decoder = load_vits_decoder(*weights, rate, speaker, name, backend);
        backend->set_math_precision(gpu::MathPrecision::Fp32);
        const auto fp32 = decoder->vocode(latent.z, latent.frames);
        ASSERT_TRUE(backend->set_math_precision(gpu::MathPrecision::Tf32));
        const auto tf32 = decoder->vocode(latent.z, latent.frames);
        backend->set_math_precision(gpu::MathPrecision::Fp32);
        ASSERT_EQ(tf32.size(), fp32.size());
        const double db = snr_db(fp32, tf32);
        std::printf("[ cuda     ] %-18s TF32 against FP32: %.1f dB, max |difference| %.3g\n",
                    name.c_str(), db, test::max_abs_diff(fp32, tf32));
        EXPECT_GE(db, 30.0);
    }
}

}  // namespace
}  // namespace etude::engine
