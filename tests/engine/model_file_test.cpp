// engine/model_file.h: a LEF file's tensors as `etude info` shows them,
// each element count the product of its shape (computed here), and a cut
// file refused with its name.
#include "engine/model_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/error.h"
#include "support/test_data.h"

namespace {

namespace fs = std::filesystem;
const std::string kModel = etude::test::test_data_dir() + "/neural/hifigan_v1.lef";

}  // namespace

TEST(ModelFile, tensors_have_their_shapes_and_element_counts) {
    const auto contents = etude::engine::read_model_file(kModel);
    EXPECT_NE(contents.metadata_json.find("\"hifigan\""), std::string::npos)
        << contents.metadata_json;
    ASSERT_FALSE(contents.tensors.empty());
    for (const auto& t : contents.tensors) {
        std::uint64_t product = 1;
        for (const auto d : t.shape) product *= d;
        EXPECT_EQ(t.elements, product) << t.name;
        EXPECT_TRUE(t.dtype == "f32" || t.dtype == "f16") << t.name << ": " << t.dtype;
        EXPECT_FALSE(t.name.empty());
    }
}

TEST(ModelFile, a_cut_file_is_refused_naming_it) {
    const fs::path cut = fs::path(ETUDE_TEST_TMP) / "model_file_cut.lef";
    {
        std::ifstream in(kModel, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), {});
        std::ofstream(cut, std::ios::binary)
            .write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    }
    try {
        etude::engine::read_model_file(cut.string());
        FAIL() << "a cut file was accepted";
    } catch (const etude::Error& e) {
        EXPECT_NE(std::string(e.what()).find("model_file_cut.lef"), std::string::npos) << e.what();
    }
    fs::remove(cut);
}
