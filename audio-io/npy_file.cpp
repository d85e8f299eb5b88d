#include "audio-io/npy_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string_view>

#include "engine/error.h"
#include "engine/partial_path.h"

namespace etude::audio_io {

// The data are copied byte for byte into floats/doubles; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little, "npy_file assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// numpy itself refuses headers above 10000 bytes unless told otherwise; a little more slack
// costs nothing, and a bound keeps a corrupt length from making us read megabytes of "header".
constexpr std::size_t kMaxHeaderBytes = 1 << 16;

// A problem found while reading; read_npy adds the file name.
struct Malformed {
    std::string what;
};

// Parser for the header's Python dict literal. numpy writes exactly
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } but any file with the same
// literal structure is accepted: either quote style, any whitespace, the three keys in any
// order, trailing commas, Python 2 long suffixes ("3L").
class HeaderParser {
  public:
    explicit HeaderParser(std::string_view text) : s_(text) {}

    struct Header {
        std::string descr;
        bool fortran_order = false;
        std::vector<std::size_t> shape;
    };

    Header parse() {
        Header h;
        bool have_descr = false, have_order = false, have_shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            const std::string key = parse_string("a dict key");
            expect(':');
            skip_space();
            if (key == "descr") {
                if (have_descr) fail("duplicate key 'descr'");
                if (peek() == '[') fail("structured dtypes are not supported");
                h.descr = parse_string("the 'descr' value");
                have_descr = true;
            } else if (key == "fortran_order") {
                if (have_order) fail("duplicate key 'fortran_order'");
                h.fortran_order = parse_bool();
                have_order = true;
            } else if (key == "shape") {
                if (have_shape) fail("duplicate key 'shape'");
                h.shape = parse_shape();
                have_shape = true;
            } else {
                fail("unexpected header key '" + key + "'");
            }
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() != '}') fail("expected ',' or '}' in the header dict");
        }
        ++pos_;  // '}'
        skip_space();
        if (pos_ != s_.size()) fail("unexpected text after the header dict");
        if (!have_descr || !have_order || !have_shape) {
            fail("header lacks one of 'descr', 'fortran_order', 'shape'");
        }
        return h;
    }

  private:
    [[noreturn]] void fail(const std::string& why) const { throw Malformed{"bad header: " + why}; }
    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    void skip_space() {
        while (pos_ < s_.size() &&
               (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
            ++pos_;
        }
    }
    void expect(char c) {
        skip_space();
        if (peek() != c) fail(std::string("expected '") + c + "'");
        ++pos_;
    }

    std::string parse_string(const char* what) {
        skip_space();
        const char quote = peek();
        if (quote != '\'' && quote != '"') fail(std::string("expected a string for ") + what);
        const std::size_t start = ++pos_;
        while (pos_ < s_.size() && s_[pos_] != quote) {
            // Escapes never occur in the keys or dtype strings we accept; refusing them keeps the
            // parser trivially correct.
            if (s_[pos_] == '\\') fail("escape sequences are not supported");
            ++pos_;
        }
        if (pos_ >= s_.size()) fail("unterminated string");
        return std::string(s_.substr(start, pos_++ - start));
    }

    bool parse_bool() {
        if (s_.substr(pos_, 4) == "True") {
            pos_ += 4;
            return true;
        }
        if (s_.substr(pos_, 5) == "False") {
            pos_ += 5;
            return false;
        }
        fail("'fortran_order' must be True or False");
    }

    std::vector<std::size_t> parse_shape() {
        std::vector<std::size_t> shape;
        if (peek() != '(') fail("'shape' must be a tuple");
        ++pos_;
        while (true) {
            skip_space();
            if (peek() == ')') break;
            // A tuple of one element needs its comma, "(3,)", but "(3)" is just 3 in Python; we
            // take either, the meaning is not in doubt.
            shape.push_back(parse_dimension());
            if (shape.size() > 32) fail("more than 32 dimensions");
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() != ')') fail("expected ',' or ')' in 'shape'");
        }
        ++pos_;
        return shape;
    }

    std::size_t parse_dimension() {
        if (peek() == '-') fail("negative dimension in 'shape'");
        if (peek() < '0' || peek() > '9') fail("'shape' must hold non-negative integers");
        std::size_t value = 0;
        while (peek() >= '0' && peek() <= '9') {
            const auto digit = static_cast<std::size_t>(peek() - '0');
            if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) {
                fail("dimension too large in 'shape'");
            }
            value = value * 10 + digit;
            ++pos_;
        }
        if (peek() == 'L' || peek() == 'l') ++pos_;  // written by numpy under Python 2
        return value;
    }

    std::string_view s_;
    std::size_t pos_ = 0;
};

std::uint32_t little_endian(const unsigned char* p, std::size_t bytes) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
    return v;
}

std::string quoted(const std::string& path) {
    return "'" + path + "'";
}

NpyArray read_validated(std::ifstream& in, std::uint64_t file_size) {
    // Preamble: magic (6), version (2), header length (2 in 1.0, 4 in 2.0 and 3.0).
    std::array<unsigned char, 12> pre{};
    if (file_size < 10) throw Malformed{"not a .npy file (too short for the magic and version)"};
    in.read(reinterpret_cast<char*>(pre.data()), 10);
    if (!in) throw Malformed{"read error in the preamble"};
    if (std::memcmp(pre.data(), kMagic.data(), kMagic.size()) != 0) {
        throw Malformed{"not a .npy file (no \\x93NUMPY magic)"};
    }
    const unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0) {
        throw Malformed{"unsupported .npy format version " + std::to_string(major) + "." +
                        std::to_string(minor) + " (need 1.0, 2.0 or 3.0)"};
    }
    std::size_t preamble = 10;
    std::uint32_t header_len = 0;
    if (major == 1) {
        header_len = little_endian(pre.data() + 8, 2);
    } else {
        if (file_size < 12) throw Malformed{"truncated preamble"};
        in.read(reinterpret_cast<char*>(pre.data()) + 10, 2);
        if (!in) throw Malformed{"read error in the preamble"};
        header_len = little_endian(pre.data() + 8, 4);
        preamble = 12;
    }
    if (header_len > kMaxHeaderBytes) {
        throw Malformed{"header length " + std::to_string(header_len) + " is absurd (limit " +
                        std::to_string(kMaxHeaderBytes) + ")"};
    }
    if (preamble + header_len > file_size) {
        throw Malformed{"truncated header (" + std::to_string(header_len) + " bytes announced, " +
                        std::to_string(file_size - preamble) + " present)"};
    }
    std::string header(header_len, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header_len));
    if (!in) throw Malformed{"read error in the header"};
    if (header.find('\0') != std::string::npos) throw Malformed{"bad header: contains NUL bytes"};

    const HeaderParser::Header h = HeaderParser(header).parse();
    std::size_t item_size = 0;
    if (h.descr == "<f4") {
        item_size = 4;
    } else if (h.descr == "<f8") {
        item_size = 8;
    } else if (h.descr.size() >= 2 && h.descr[0] == '>') {
        throw Malformed{"big-endian dtype '" + h.descr +
                        "' is not supported (need '<f4' or '<f8')"};
    } else {
        throw Malformed{"unsupported dtype '" + h.descr +
                        "' (need float32 '<f4' or float64 '<f8')"};
    }
    if (h.fortran_order) throw Malformed{"Fortran-order arrays are not supported (need C order)"};

    std::size_t count = 1;
    for (std::size_t d : h.shape) {
        if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d) {
            throw Malformed{"shape has too many elements"};
        }
        count *= d;
    }
    const std::uint64_t data_bytes = file_size - preamble - header_len;
    // Compared by division so an absurd count cannot overflow the byte total: nothing gets
    // allocated unless the file really holds exactly this many values.
    if (data_bytes % item_size != 0 || data_bytes / item_size != count) {
        const std::string want =
            std::to_string(count) + " values of " + std::to_string(item_size) + " bytes";
        if (data_bytes / item_size < count) {
            throw Malformed{"truncated data (shape needs " + want + ", file has " +
                            std::to_string(data_bytes) + " data bytes)"};
        }
        throw Malformed{"data longer than the shape says (shape needs " + want + ", file has " +
                        std::to_string(data_bytes) + " data bytes)"};
    }

    NpyArray array;
    array.shape = h.shape;
    array.data.resize(count);
    if (item_size == 4) {
        in.read(reinterpret_cast<char*>(array.data.data()),
                static_cast<std::streamsize>(count * sizeof(float)));
    } else {
        // Doubles are converted in chunks so a large file does not need a second full copy.
        std::vector<double> chunk(std::min<std::size_t>(count, 1 << 14));
        for (std::size_t done = 0; done < count && in;) {
            const std::size_t n = std::min(chunk.size(), count - done);
            in.read(reinterpret_cast<char*>(chunk.data()),
                    static_cast<std::streamsize>(n * sizeof(double)));
            std::transform(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n),
                           array.data.begin() + static_cast<std::ptrdiff_t>(done),
                           [](double v) { return static_cast<float>(v); });
            done += n;
        }
    }
    if (!in) throw Malformed{"read error in the data"};
    return array;
}

std::string shape_literal(const std::vector<std::size_t>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) s += ", ";
        s += std::to_string(shape[i]);
    }
    if (shape.size() == 1) s += ",";  // Python's one-element tuple
    return s + ")";
}

// Removes the temporary file unless the write got as far as the rename.
class TempFile {
  public:
    explicit TempFile(std::string path) : path_(std::move(path)) {}
    ~TempFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!renamed_) ::unlink(path_.c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    bool open() {
        fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        return fd_ >= 0;
    }
    bool write_all(const void* data, std::size_t size) {
        const char* p = static_cast<const char*>(data);
        while (size > 0) {
            const ssize_t n = ::write(fd_, p, size);
            if (n < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            p += n;
            size -= static_cast<std::size_t>(n);
        }
        return true;
    }
    // fsync before rename: otherwise a crash could leave the new name pointing at an empty file.
    bool sync_and_close() {
        const bool ok = ::fsync(fd_) == 0;
        const bool closed = ::close(fd_) == 0;
        fd_ = -1;
        return ok && closed;
    }
    bool rename_to(const std::string& target) {
        renamed_ = ::rename(path_.c_str(), target.c_str()) == 0;
        return renamed_;
    }

  private:
    std::string path_;
    int fd_ = -1;
    bool renamed_ = false;
};

}  // namespace

NpyArray read_npy(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read " + quoted(path) + ": " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff end = in.tellg();
    in.seekg(0, std::ios::beg);
    if (end < 0 || !in) throw Error("cannot read " + quoted(path) + ": not a seekable file");
    try {
        return read_validated(in, static_cast<std::uint64_t>(end));
    } catch (const Malformed& e) {
        throw Error("cannot read " + quoted(path) + ": " + e.what);
    }
}

void write_npy(const std::string& path, const std::vector<std::size_t>& shape,
               std::span<const float> data) {
    std::size_t count = 1;
    for (std::size_t d : shape) {
        if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d) {
            throw Error("cannot write " + quoted(path) + ": shape has too many elements");
        }
        count *= d;
    }
    if (count != data.size()) {
        throw Error("cannot write " + quoted(path) + ": shape " + shape_literal(shape) + " holds " +
                    std::to_string(count) + " values but " + std::to_string(data.size()) +
                    " were given");
    }

    const std::string dict =
        "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_literal(shape) + ", }";
    // numpy pads the header with spaces and a final newline so that the data start on a
    // 64-byte boundary; readers that memory-map the data rely on it.
    const auto padded_header = [&](std::size_t preamble) {
        const std::size_t unpadded = preamble + dict.size() + 1;
        return dict + std::string((64 - unpadded % 64) % 64, ' ') + "\n";
    };
    std::string header = padded_header(10);
    std::string preamble(kMagic);
    if (header.size() <= 0xffff) {
        preamble += std::string{'\x01', '\x00'};
        preamble += static_cast<char>(header.size() & 0xff);
        preamble += static_cast<char>((header.size() >> 8) & 0xff);
    } else {
        header = padded_header(12);
        preamble += std::string{'\x02', '\x00'};
        for (int i = 0; i < 4; ++i)
            preamble += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    }

    const std::string temp = partial_path(path);
    TempFile file(temp);
    const auto fail = [&](const char* stage) {
        throw Error("cannot write " + quoted(path) + " (" + stage + "): " + std::strerror(errno));
    };
    if (!file.open()) fail("create");
    if (!file.write_all(preamble.data(), preamble.size()) ||
        !file.write_all(header.data(), header.size()) ||
        !file.write_all(data.data(), data.size_bytes())) {
        fail("write");
    }
    if (!file.sync_and_close()) fail("flush");
    if (!file.rename_to(path)) fail("rename");
}

}  // namespace etude::audio_io
