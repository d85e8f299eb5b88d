// .npy reading and writing: files made by real NumPy (tests/data/npy, see make_npy_fixtures.py
// there), round trips, and damaged or hostile files, which must give a clear error and never a
// crash.
#include "audio-io/npy_file.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace etude::audio_io {
namespace {

namespace fs = std::filesystem;

#ifdef ETUDE_TEST_DATA
const fs::path kFixtures = fs::path(ETUDE_TEST_DATA) / "npy";
#else
const fs::path kFixtures = fs::path(__FILE__).parent_path().parent_path() / "data" / "npy";
#endif

std::string fixture(const char* name) {
    return (kFixtures / name).string();
}

// Named after the test too: ctest runs tests of this program at once, and
// two that damaged the same file raced (one read the other's bytes).
std::string temp_path(const std::string& name) {
    const char* test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    return std::string(ETUDE_TEST_TMP) + "/npy_" + test + "_" + name;
}

std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
    // A new file rather than a truncated one: ext4 flushes files truncated and rewritten
    // (auto_da_alloc), which made the corruption test 20 times slower.
    fs::remove(path);
    std::ofstream(path, std::ios::binary) << bytes;
}

// The fixtures' values: 0.25 * i - 3 over the flattened C-order index (exact in float32).
std::vector<float> ramp(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
    return v;
}

// The error message of read_npy(path), which must name the file; "" if it did not throw.
std::string read_error(const std::string& path) {
    try {
        read_npy(path);
    } catch (const std::runtime_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
        return msg;
    }
    return "";
}

// A .npy file assembled by hand: version 1.0 with the given header dict (padded like numpy's)
// followed by `data`.
std::string handmade(const std::string& dict, const std::string& data, char major = 1) {
    std::string header = dict;
    const std::size_t preamble = major == 1 ? 10 : 12;
    header += std::string((64 - (preamble + header.size() + 1) % 64) % 64, ' ') + "\n";
    std::string out = std::string("\x93NUMPY", 6) + major + '\0';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    if (major != 1) out += std::string(2, '\0');
    return out + header + data;
}

std::string float_bytes(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(NpyRead, reads_float32_files_written_by_numpy) {
    struct Case {
        const char* name;
        std::vector<std::size_t> shape;
    };
    for (const Case& c : {Case{"f32_2x3.npy", {2, 3}}, Case{"f32_2x1x3.npy", {2, 1, 3}},
                          Case{"f32_1000.npy", {1000}}, Case{"f32_v2_3x2.npy", {3, 2}},
                          Case{"f32_v3_3x2.npy", {3, 2}}}) {
        SCOPED_TRACE(c.name);
        const NpyArray a = read_npy(fixture(c.name));
        EXPECT_EQ(a.shape, c.shape);
        EXPECT_EQ(a.data, ramp(a.data.size()));
        std::size_t n = 1;
        for (std::size_t d : c.shape) n *= d;
        EXPECT_EQ(a.data.size(), n);
    }
}

TEST(NpyRead, reads_scalar_and_empty_arrays) {
    const NpyArray scalar = read_npy(fixture("f32_scalar.npy"));
    EXPECT_TRUE(scalar.shape.empty());
    ASSERT_EQ(scalar.data.size(), 1u);
    EXPECT_EQ(scalar.data[0], 3.25f);

    const NpyArray empty = read_npy(fixture("f32_0x4.npy"));
    EXPECT_EQ(empty.shape, (std::vector<std::size_t>{0, 4}));
    EXPECT_TRUE(empty.data.empty());
}

TEST(NpyRead, converts_float64_to_nearest_float) {
    const NpyArray a = read_npy(fixture("f64_4x5.npy"));
    EXPECT_EQ(a.shape, (std::vector<std::size_t>{4, 5}));
    ASSERT_EQ(a.data.size(), 20u);
    for (std::size_t i = 0; i < 20; ++i) {
        // numpy computed 0.1 * i - 1 in double; the same double rounded to float is the answer.
        // The product is rounded on its own, as numpy's was: GCC fuses 0.1 * i - 1 into one
        // multiply-add on AArch64 (-ffp-contract=fast), which gives 5.6e-17 for i = 10, not 0.
        const volatile double tenth = 0.1 * static_cast<double>(i);
        EXPECT_EQ(a.data[i], static_cast<float>(tenth - 1.0)) << i;
    }
}

TEST(NpyRead, refuses_numpy_files_of_unsupported_layout_or_dtype) {
    struct Case {
        const char* name;
        const char* problem;
    };
    for (const Case& c : {Case{"f32_fortran_2x3.npy", "Fortran"}, Case{"i32_4.npy", "'<i4'"},
                          Case{"f32_bigendian_3.npy", "big-endian"},
                          Case{"structured_2.npy", "structured"}, Case{"c64_2.npy", "'<c8'"}}) {
        const std::string msg = read_error(fixture(c.name));
        EXPECT_NE(msg.find(c.problem), std::string::npos) << c.name << ": " << msg;
    }
}

TEST(NpyRead, missing_file_is_an_error_naming_it) {
    EXPECT_NE(read_error(temp_path("does_not_exist.npy")), "");
}

TEST(NpyWrite, round_trips_shapes_and_values) {
    std::mt19937 rng(7);
    std::normal_distribution<float> gauss(0.0f, 100.0f);
    for (const std::vector<std::size_t>& shape :
         {std::vector<std::size_t>{}, {0}, {5}, {3, 4}, {2, 0, 3}, {2, 3, 4}, {1, 1, 1, 7}}) {
        std::size_t n = 1;
        for (std::size_t d : shape) n *= d;
        std::vector<float> data(n);
        for (float& v : data) v = gauss(rng);
        if (n > 2) {
            data[0] = -0.0f;
            data[1] = std::numeric_limits<float>::denorm_min();
        }
        const std::string path = temp_path("roundtrip.npy");
        write_npy(path, shape, data);
        const NpyArray back = read_npy(path);
        EXPECT_EQ(back.shape, shape);
        ASSERT_EQ(back.data.size(), data.size());
        for (std::size_t i = 0; i < n; ++i) {
            EXPECT_EQ(std::bit_cast<std::uint32_t>(back.data[i]),
                      std::bit_cast<std::uint32_t>(data[i]));
        }
    }
}

TEST(NpyWrite, writes_the_bytes_numpy_writes) {
    // numpy's own file for the same array is the reference, header padding included.
    const std::string path = temp_path("like_numpy.npy");
    write_npy(path, {2, 3}, ramp(6));
    EXPECT_EQ(read_bytes(path), read_bytes(fixture("f32_2x3.npy")));
    write_npy(path, {1000}, ramp(1000));
    EXPECT_EQ(read_bytes(path), read_bytes(fixture("f32_1000.npy")));
    write_npy(path, {}, std::vector<float>{3.25f});
    EXPECT_EQ(read_bytes(path), read_bytes(fixture("f32_scalar.npy")));
}

TEST(NpyWrite, size_mismatch_throws_and_leaves_the_old_file) {
    const std::string path = temp_path("keep.npy");
    write_npy(path, {2}, std::vector<float>{1.0f, 2.0f});
    const std::string before = read_bytes(path);
    EXPECT_THROW(write_npy(path, {3}, std::vector<float>{1.0f, 2.0f}), std::runtime_error);
    EXPECT_EQ(read_bytes(path), before);
}

TEST(NpyWrite, unwritable_place_throws_and_leaves_nothing) {
    const std::string dir = temp_path("no_such_dir");
    const std::string path = dir + "/x.npy";
    EXPECT_THROW(write_npy(path, {1}, std::vector<float>{1.0f}), std::runtime_error);
    EXPECT_FALSE(fs::exists(dir));
}

TEST(NpyRead, refuses_damaged_preambles) {
    const std::string good = read_bytes(fixture("f32_2x3.npy"));
    const std::string path = temp_path("damaged.npy");
    struct Case {
        std::string bytes;
        const char* problem;
    };
    const std::vector<Case> cases = {
        {"", "too short"},
        {"hello, this is a text file, not an array\n", "magic"},
        {good.substr(0, 8), "too short"},
        {std::string("\x93NUMPY\x04\x00", 8) + good.substr(8), "version 4.0"},
        {std::string("\x93NUMPY\x01\x01", 8) + good.substr(8), "version 1.1"},
        {good.substr(0, 10), "truncated header"},
        {good.substr(0, 60), "truncated header"},
        {std::string("\x93NUMPY\x02\x00", 8) + "\xff\xff\xff\x7f" + good.substr(10), "absurd"},
        {std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated preamble"},
    };
    for (const Case& c : cases) {
        write_bytes(path, c.bytes);
        const std::string msg = read_error(path);
        EXPECT_NE(msg.find(c.problem), std::string::npos) << msg;
    }
}

TEST(NpyRead, refuses_data_shorter_or_longer_than_the_shape) {
    const std::string good = read_bytes(fixture("f32_2x3.npy"));
    const std::string path = temp_path("damaged.npy");
    for (std::size_t cut : {1u, 3u, 4u, 24u}) {
        write_bytes(path, good.substr(0, good.size() - cut));
        EXPECT_NE(read_error(path).find("truncated data"), std::string::npos) << cut;
    }
    write_bytes(path, good + "x");
    EXPECT_NE(read_error(path).find("longer than the shape"), std::string::npos);
}

TEST(NpyRead, refuses_malformed_header_dicts) {
    const std::string path = temp_path("header.npy");
    const std::string six = float_bytes(ramp(6));
    struct Case {
        std::string dict;
        const char* problem;
    };
    const std::vector<Case> cases = {
        {"{'descr': '<f4', 'fortran_order': False}", "lacks"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", "'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", "duplicate"},
        {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (6,)}", "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", "negative"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,)}", "integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 6}", "tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6 }", "expected ',' or ')'"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", "expected"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", "expected"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} trailing", "after"},
        {"['descr', '<f4']", "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
         "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}",
         "too many"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 1048576)}",
         "truncated data"},
        {"{'descr': '<f4\\'', 'fortran_order': False, 'shape': (6,)}", "escape"},
        {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)\0}", 56), "NUL"},
    };
    for (const Case& c : cases) {
        write_bytes(path, handmade(c.dict, six));
        const std::string msg = read_error(path);
        EXPECT_NE(msg.find(c.problem), std::string::npos) << c.dict << " -> " << msg;
    }
}

TEST(NpyRead, accepts_equivalent_header_spellings) {
    // What other writers (or Python 2 numpy) produce: other quotes, key order, spacing, "L".
    const std::string path = temp_path("spelling.npy");
    const std::string six = float_bytes(ramp(6));
    for (const std::string dict :
         {"{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"<f4\"}",
          "{'descr':'<f4','fortran_order':False,'shape':(2L,3L),}",
          "{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }"}) {
        write_bytes(path, handmade(dict, six));
        const NpyArray a = read_npy(path);
        EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3})) << dict;
        EXPECT_EQ(a.data, ramp(6)) << dict;
    }
    write_bytes(path,
                handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", six, 2));
    EXPECT_EQ(read_npy(path).data, ramp(6));
}

TEST(NpyRead, random_corruption_gives_errors_not_crashes) {
    // Every single-byte change of a real file (in the preamble and header, where the parser
    // works) and random multi-byte damage anywhere: read_npy returns or throws runtime_error.
    // Run under AddressSanitizer this also proves there are no out-of-bounds reads.
    const std::string good = read_bytes(fixture("f32_2x1x3.npy"));
    const std::string path = temp_path("corrupt.npy");
    std::mt19937 rng(2024);
    std::size_t thrown = 0, read = 0;
    const auto attempt = [&](const std::string& bytes) {
        write_bytes(path, bytes);
        try {
            const NpyArray a = read_npy(path);
            std::size_t n = 1;
            for (std::size_t d : a.shape) n *= d;
            EXPECT_EQ(a.data.size(), n);
            ++read;
        } catch (const std::runtime_error&) {
            ++thrown;
        }
    };
    const std::size_t header_end = 128;
    for (std::size_t pos = 0; pos < header_end; ++pos) {
        for (unsigned char value : {0x00, 0x20, 0x27, 0x28, 0x29, 0x2c, 0x30, 0x39, 0x7d, 0xff}) {
            std::string bytes = good;
            bytes[pos] = static_cast<char>(value);
            attempt(bytes);
        }
    }
    std::uniform_int_distribution<std::size_t> where(0, good.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int trial = 0; trial < 500; ++trial) {
        std::string bytes = good;
        for (int k = 0; k < 4; ++k) bytes[where(rng)] = static_cast<char>(byte(rng));
        if (trial % 3 == 0) bytes.resize(where(rng));
        attempt(bytes);
    }
    // Both outcomes occur: damage to padding is harmless, damage to structure is caught.
    EXPECT_GT(thrown, 0u);
    EXPECT_GT(read, 0u);
}

}  // namespace
}  // namespace etude::audio_io
