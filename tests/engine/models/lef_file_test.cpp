// LEF model files: what is written is read back, and every kind of damage is
// rejected with a message naming what is wrong, never a crash.
#include "engine/models/lef_file.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/error.h"

using namespace etude::engine;

namespace {

const std::string kMeta =
    R"({"architecture":"hifigan","sample_rate":22050,"n_fft":1024,"hop":256})";

std::vector<std::uint8_t> sample_file() {
    LefWriter w(kMeta);
    std::vector<float> a(3 * 5);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * static_cast<float>(i) - 1.0f;
    w.add_f32("conv_pre.weight", {3, 5}, a);
    std::vector<std::uint16_t> h = {float_to_half(1.0f), float_to_half(-2.5f), float_to_half(0.0f)};
    w.add_f16("conv_pre.bias", {3}, h);
    return w.bytes();
}

std::string error_of(const std::vector<std::uint8_t>& b) {
    try {
        LefFile::from_bytes(b, "test.lef");
    } catch (const etude::Error& e) {
        return e.what();
    }
    return "";
}

// Re-seals a deliberately edited file with a valid whole-file checksum, so the
// test reaches the specific check it aims at.
void reseal(std::vector<std::uint8_t>& b) {
    std::memset(b.data() + 56, 0, 4);
    const auto c = static_cast<std::uint32_t>(crc32(0, b.data(), static_cast<uInt>(b.size())));
    std::memcpy(b.data() + 56, &c, 4);
}

}  // namespace

TEST(LefFile, round_trips_metadata_and_f32_f16_tensors) {
    const auto bytes = sample_file();
    const LefFile f = LefFile::from_bytes(bytes, "test.lef");
    EXPECT_EQ(f.metadata_json(), kMeta);
    ASSERT_EQ(f.tensors().size(), 2u);
    const std::uint64_t shape[] = {3, 5};
    const auto w = f.floats("conv_pre.weight", shape);
    ASSERT_EQ(w.size(), 15u);
    EXPECT_FLOAT_EQ(w[0], -1.0f);
    EXPECT_FLOAT_EQ(w[14], 2.5f);
    const auto b = f.floats("conv_pre.bias");
    EXPECT_FLOAT_EQ(b[0], 1.0f);
    EXPECT_FLOAT_EQ(b[1], -2.5f);
    EXPECT_EQ(f.flags() & 1u, 1u);  // contains f16
    for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % LefFile::kAlignment, 0u);
}

TEST(LefFile, writes_atomically_and_maps_files) {
    const std::string path = std::string(ETUDE_TEST_TMP) + "/sample.lef";
    LefWriter w(kMeta);
    const float v[] = {1, 2, 3, 4};
    w.add_f32("x", {2, 2}, v);
    w.write(path);
    const LefFile f = LefFile::open(path);
    EXPECT_EQ(f.floats("x")[3], 4.0f);
    EXPECT_THROW(LefFile::open(std::string(ETUDE_TEST_TMP) + "/missing.lef"), etude::Error);
    EXPECT_THROW(w.write("/nonexistent-dir/x.lef"), etude::Error);
}

TEST(LefFile, rejects_truncation_at_every_length) {
    const auto bytes = sample_file();
    for (std::size_t n = 0; n < bytes.size(); n += 7) {
        std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
        EXPECT_NE(error_of(cut), "") << "accepted a file cut at " << n << " bytes";
    }
}

TEST(LefFile, rejects_every_flipped_byte) {
    const auto bytes = sample_file();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto bad = bytes;
        bad[i] ^= 0x5A;
        EXPECT_NE(error_of(bad), "") << "accepted a flip at byte " << i;
    }
}

TEST(LefFile, names_the_field_or_tensor_at_fault) {
    auto b = sample_file();
    b[0] = 'X';
    EXPECT_NE(error_of(b).find("bad magic"), std::string::npos);

    b = sample_file();
    const std::uint32_t v2 = 2;
    std::memcpy(b.data() + 8, &v2, 4);
    EXPECT_NE(error_of(b).find("version 2 is not supported"), std::string::npos);

    b = sample_file();
    b[b.size() - 64] ^= 1;  // inside the last tensor's data
    reseal(b);
    EXPECT_NE(error_of(b).find("tensor 'conv_pre.bias' checksum mismatch"), std::string::npos)
        << error_of(b);

    LefWriter no_arch(R"({"sample_rate":22050})");
    const float x[] = {1};
    no_arch.add_f32("x", {1}, x);
    EXPECT_NE(error_of(no_arch.bytes()).find("'architecture'"), std::string::npos);

    LefWriter bad_rate(R"({"architecture":"vocos","sample_rate":5})");
    bad_rate.add_f32("x", {1}, x);
    EXPECT_NE(error_of(bad_rate.bytes()).find("'sample_rate'"), std::string::npos);

    LefWriter dup(kMeta);
    dup.add_f32("x", {1}, x);
    dup.add_f32("x", {1}, x);
    EXPECT_NE(error_of(dup.bytes()).find("appears twice"), std::string::npos);

    const LefFile f = LefFile::from_bytes(sample_file(), "test.lef");
    const std::uint64_t wrong[] = {5, 3};
    try {
        f.floats("conv_pre.weight", wrong);
        FAIL();
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("has shape (3, 5), expected (5, 3)"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(f.floats("no.such.tensor"), etude::Error);
}

TEST(LefFile, rejects_absurd_sizes_without_allocating_them) {
    auto b = sample_file();
    const std::uint64_t huge = ~0ull;
    std::memcpy(b.data() + 40, &huge, 8);  // tensor count
    reseal(b);
    EXPECT_NE(error_of(b).find("tensor count"), std::string::npos) << error_of(b);
    b = sample_file();
    std::memcpy(b.data() + 24, &huge, 8);  // metadata size
    reseal(b);
    EXPECT_NE(error_of(b).find("absurd"), std::string::npos) << error_of(b);
}

TEST(LefFile, half_precision_conversion_is_exact_where_it_can_be) {
    for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f})
        EXPECT_EQ(half_to_float(float_to_half(v)), v) << v;
    EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
    EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}
