#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "support/test_data.h"

extern "C" int etude_c_api_smoke(size_t* samples_out);

TEST(CApi, speaks_reports_errors_and_cancels_from_c) {
    size_t samples = 0;
    EXPECT_EQ(etude_c_api_smoke(&samples), 0) << "the number is the first failed check in "
                                                 "tests/support/c_api_smoke.c";
    // "Hello from C." at 22.05 kHz: about a second of speech.
    EXPECT_GT(samples, 22050u / 2);
    EXPECT_LT(samples, 22050u * 3);
}

extern "C" int etude_c_api_piper_smoke(const char* voice_path, size_t* samples_out);

TEST(CApi, speaks_with_a_piper_voice_from_c) {
    const std::string voice = etude::test::test_data_dir() + "/piper/test_medium_multi.onnx";
    size_t samples = 0;
    EXPECT_EQ(etude_c_api_piper_smoke(voice.c_str(), &samples), 0)
        << "the number is the first failed check in tests/support/c_api_smoke.c";
    EXPECT_GT(samples, 0u);
}

extern "C" int etude_c_api_ssml_smoke(size_t* samples_out);

TEST(CApi, speaks_ssml_with_marks_from_c) {
    size_t samples = 0;
    EXPECT_EQ(etude_c_api_ssml_smoke(&samples), 0)
        << "the number is the first failed check in tests/support/c_api_smoke.c";
    EXPECT_GT(samples, 16000u / 2);
}
