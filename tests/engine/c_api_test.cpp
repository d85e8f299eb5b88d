#include <gtest/gtest.h>

#include <cstddef>

extern "C" int etude_c_api_smoke(size_t* samples_out);

TEST(CApi, speaks_reports_errors_and_cancels_from_c) {
    size_t samples = 0;
    EXPECT_EQ(etude_c_api_smoke(&samples), 0) << "the number is the first failed check in "
                                                 "tests/support/c_api_smoke.c";
    // "Hello from C." at 22.05 kHz: about a second of speech.
    EXPECT_GT(samples, 22050u / 2);
    EXPECT_LT(samples, 22050u * 3);
}
