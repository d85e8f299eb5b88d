#include "engine/models/lef_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/partial_path.h"

namespace etude::engine {
namespace {

static_assert(std::endian::native == std::endian::little,
              "LEF readers assume a little-endian host");

std::uint32_t crc(std::span<const std::uint8_t> bytes, std::uint32_t seed = 0) {
    // zlib takes at most 4 GiB per call.
    uLong c = seed;
    while (!bytes.empty()) {
        const std::size_t n = std::min<std::size_t>(bytes.size(), 1u << 30);
        c = crc32(c, bytes.data(), static_cast<uInt>(n));
        bytes = bytes.subspan(n);
    }
    return static_cast<std::uint32_t>(c);
}

template <typename T>
T load(std::span<const std::uint8_t> b, std::size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

bool add_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return __builtin_add_overflow(a, b, &out);
}
bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return __builtin_mul_overflow(a, b, &out);
}

// A cursor over the index that refuses to read past its end.
class Reader {
  public:
    Reader(std::span<const std::uint8_t> b, std::uint64_t pos, const std::string& label)
        : b_(b), pos_(pos), label_(label) {}
    template <typename T>
    T take(const char* what) {
        if (pos_ > b_.size() || b_.size() - pos_ < sizeof(T))
            throw Error(label_ + ": the tensor index is truncated (reading " + what + ")");
        T v = load<T>(b_, static_cast<std::size_t>(pos_));
        pos_ += sizeof(T);
        return v;
    }
    std::string take_string(std::size_t n) {
        if (pos_ > b_.size() || b_.size() - pos_ < n)
            throw Error(label_ + ": the tensor index is truncated (a name)");
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    std::uint64_t pos() const { return pos_; }

  private:
    std::span<const std::uint8_t> b_;
    std::uint64_t pos_;
    const std::string& label_;
};

std::size_t dtype_size(LefDtype d) {
    return d == LefDtype::F32 ? 4 : 2;
}

bool printable_name(const std::string& n) {
    for (unsigned char c : n)
        if (c < 0x20 || c == 0x7F) return false;
    return true;
}

}  // namespace

std::uint64_t LefTensor::elements() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

struct LefFile::Mapping {
    void* addr = MAP_FAILED;
    std::size_t size = 0;
    std::vector<std::uint8_t> owned;  // for from_bytes
    ~Mapping() {
        if (addr != MAP_FAILED) ::munmap(addr, size);
    }
};

LefFile LefFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot open model '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("model '" + path + "' is not a regular file");
    }
    auto m = std::make_shared<Mapping>();
    m->size = static_cast<std::size_t>(st.st_size);
    if (m->size > 0) m->addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m->size > 0 && m->addr == MAP_FAILED)
        throw Error("cannot map model '" + path + "': " + std::strerror(errno));
    std::span<const std::uint8_t> bytes(
        m->size ? static_cast<const std::uint8_t*>(m->addr) : nullptr, m->size);
    LefFile f = from_bytes(bytes, "model '" + path + "'");
    f.map_ = std::move(m);
    return f;
}

LefFile LefFile::from_bytes(std::span<const std::uint8_t> b, const std::string& label) {
    LefFile f;
    f.bytes_ = b;
    f.label_ = label;
    const std::uint64_t size = b.size();
    if (size < kHeaderBytes)
        throw Error(label + ": too short for a LEF header (" + std::to_string(size) +
                    " bytes, need 64)");
    if (std::memcmp(b.data(), kMagic, 8) != 0) throw Error(label + ": not a LEF file (bad magic)");
    const auto version = load<std::uint32_t>(b, 8);
    if (version != kVersion)
        throw Error(label + ": LEF version " + std::to_string(version) +
                    " is not supported (this build reads " + std::to_string(kVersion) + ")");
    f.flags_ = load<std::uint32_t>(b, 12);
    if (f.flags_ & ~1u) throw Error(label + ": unknown header flags " + std::to_string(f.flags_));
    const auto meta_off = load<std::uint64_t>(b, 16), meta_len = load<std::uint64_t>(b, 24);
    const auto index_off = load<std::uint64_t>(b, 32), count = load<std::uint64_t>(b, 40);
    const auto data_off = load<std::uint64_t>(b, 48);
    const auto file_crc = load<std::uint32_t>(b, 56);
    if (load<std::uint32_t>(b, 60) != 0) throw Error(label + ": reserved header field is not zero");

    std::uint64_t end = 0;
    if (meta_len > kMaxMetadataBytes)
        throw Error(label + ": metadata of " + std::to_string(meta_len) + " bytes is absurd");
    if (meta_off < kHeaderBytes || add_overflows(meta_off, meta_len, end) || end > size)
        throw Error(label + ": metadata lies outside the file (truncated?)");
    if (count == 0 || count > kMaxTensors)
        throw Error(label + ": tensor count " + std::to_string(count) + " is out of range (1.." +
                    std::to_string(kMaxTensors) + ")");
    if (index_off < kHeaderBytes || index_off >= size)
        throw Error(label + ": tensor index lies outside the file");
    if (data_off % kAlignment != 0 || data_off > size)
        throw Error(label + ": data section offset is invalid");

    // Whole-file checksum first: a flipped byte anywhere is reported as such.
    std::uint32_t c = crc(b.first(56));
    const std::uint8_t zero[4] = {0, 0, 0, 0};
    c = crc(std::span(zero, 4), c);
    c = crc(b.subspan(60), c);
    // Fuzzing builds skip checksums, so mutated inputs reach the checks behind them.
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (c != file_crc) throw Error(label + ": file checksum mismatch (corrupt or truncated)");
#else
    (void)c;
    (void)file_crc;
#endif

    // Metadata: a JSON object with the fields every model must have.
    f.metadata_.assign(reinterpret_cast<const char*>(b.data() + meta_off),
                       static_cast<std::size_t>(meta_len));
    const auto meta = nlohmann::json::parse(f.metadata_, nullptr, /*allow_exceptions=*/false);
    if (meta.is_discarded() || !meta.is_object())
        throw Error(label + ": metadata is not a JSON object");
    if (!meta.contains("architecture") || !meta["architecture"].is_string())
        throw Error(label + ": metadata field 'architecture' is missing or not a string");
    if (!meta.contains("sample_rate") || !meta["sample_rate"].is_number_integer() ||
        meta["sample_rate"].get<std::int64_t>() < 8000 ||
        meta["sample_rate"].get<std::int64_t>() > 192000)
        throw Error(label + ": metadata field 'sample_rate' is missing or outside 8000-192000");

    Reader r(b, index_off, label);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;
    for (std::uint64_t i = 0; i < count; ++i) {
        LefTensor t;
        const auto name_len = r.take<std::uint16_t>("a name length");
        if (name_len == 0 || name_len > kMaxNameBytes)
            throw Error(label + ": tensor " + std::to_string(i) + " has a name of " +
                        std::to_string(name_len) + " bytes");
        t.name = r.take_string(name_len);
        if (!printable_name(t.name))
            throw Error(label + ": tensor " + std::to_string(i) + " has an unprintable name");
        const auto dtype = r.take<std::uint8_t>("a dtype");
        if (dtype > 1)
            throw Error(label + ": tensor '" + t.name + "' has unknown dtype " +
                        std::to_string(dtype));
        t.dtype = static_cast<LefDtype>(dtype);
        const auto ndim = r.take<std::uint8_t>("a rank");
        if (ndim == 0 || ndim > kMaxDims)
            throw Error(label + ": tensor '" + t.name + "' has rank " + std::to_string(ndim));
        std::uint64_t elements = 1;
        for (int d = 0; d < ndim; ++d) {
            const auto dim = r.take<std::uint64_t>("a dimension");
            if (dim == 0 || mul_overflows(elements, dim, elements))
                throw Error(label + ": tensor '" + t.name + "' has an absurd shape");
            t.shape.push_back(dim);
        }
        t.offset = r.take<std::uint64_t>("an offset");
        t.bytes = r.take<std::uint64_t>("a size");
        t.crc32 = r.take<std::uint32_t>("a checksum");
        std::uint64_t expect = 0, start = 0, stop = 0;
        if (mul_overflows(elements, dtype_size(t.dtype), expect) || expect != t.bytes)
            throw Error(label + ": tensor '" + t.name + "' size " + std::to_string(t.bytes) +
                        " does not match its shape and dtype");
        if (t.offset % kAlignment != 0)
            throw Error(label + ": tensor '" + t.name + "' is not aligned");
        if (add_overflows(data_off, t.offset, start) || add_overflows(start, t.bytes, stop) ||
            stop > size)
            throw Error(label + ": tensor '" + t.name + "' lies outside the file (truncated?)");
        if (!f.by_name_.emplace(t.name, f.tensors_.size()).second)
            throw Error(label + ": tensor name '" + t.name + "' appears twice");
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        if (crc(b.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(t.bytes))) !=
            t.crc32)
            throw Error(label + ": tensor '" + t.name + "' checksum mismatch");
#endif
        extents.emplace_back(start, stop);
        f.tensors_.push_back(std::move(t));
    }
    if (data_off < r.pos()) throw Error(label + ": data section overlaps the tensor index");
    std::sort(extents.begin(), extents.end());
    for (std::size_t i = 1; i < extents.size(); ++i)
        if (extents[i].first < extents[i - 1].second) throw Error(label + ": two tensors overlap");
    f.data_offset_ = data_off;
    return f;
}

const LefTensor* LefFile::find(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> LefFile::floats(std::string_view name,
                                   std::span<const std::uint64_t> expected) const {
    const LefTensor* t = find(name);
    if (!t) throw Error(label_ + ": tensor '" + std::string(name) + "' is missing");
    if (!expected.empty() &&
        !std::equal(expected.begin(), expected.end(), t->shape.begin(), t->shape.end())) {
        auto fmt = [](auto s) {
            std::string o = "(";
            for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
            return o + ")";
        };
        throw Error(label_ + ": tensor '" + t->name + "' has shape " + fmt(t->shape) +
                    ", expected " + fmt(expected));
    }
    std::vector<float> out(static_cast<std::size_t>(t->elements()));
    const std::uint8_t* src = bytes_.data() + data_offset_ + t->offset;
    if (t->dtype == LefDtype::F32) {
        std::memcpy(out.data(), src, out.size() * 4);
    } else {
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] = half_to_float(load<std::uint16_t>(
                bytes_, static_cast<std::size_t>(data_offset_ + t->offset + 2 * i)));
    }
    return out;
}

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    std::uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            int e = -1;
            std::uint32_t m = man;
            do {
                ++e;
                m <<= 1;
            } while ((m & 0x400u) == 0);
            bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (m & 0x3FFu) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    return std::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const int exp = static_cast<int>((x >> 23) & 0xFF) - 127 + 15;
    std::uint32_t man = x & 0x7FFFFFu;
    if (((x >> 23) & 0xFF) == 0xFF)
        return static_cast<std::uint16_t>(sign | 0x7C00u | (man ? 0x200u : 0));
    if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7C00u);
    if (exp <= 0) {
        if (exp < -10) return static_cast<std::uint16_t>(sign);
        man |= 0x800000u;
        const int shift = 14 - exp;
        std::uint32_t half = man >> shift;
        if ((man >> (shift - 1)) & 1u) ++half;  // round half up
        return static_cast<std::uint16_t>(sign | half);
    }
    std::uint32_t half = sign | static_cast<std::uint32_t>(exp) << 10 | man >> 13;
    if (man & 0x1000u) ++half;  // round half up (carries into the exponent correctly)
    return static_cast<std::uint16_t>(half);
}

void LefWriter::add(const std::string& name, LefDtype dtype, std::vector<std::uint64_t> shape,
                    const void* data, std::size_t bytes) {
    Entry e;
    e.info.name = name;
    e.info.dtype = dtype;
    e.info.shape = std::move(shape);
    e.data.resize(bytes);
    std::memcpy(e.data.data(), data, bytes);
    entries_.push_back(std::move(e));
}

void LefWriter::add_f32(const std::string& name, std::vector<std::uint64_t> shape,
                        std::span<const float> values) {
    add(name, LefDtype::F32, std::move(shape), values.data(), values.size_bytes());
}

void LefWriter::add_f16(const std::string& name, std::vector<std::uint64_t> shape,
                        std::span<const std::uint16_t> values) {
    add(name, LefDtype::F16, std::move(shape), values.data(), values.size_bytes());
}

std::vector<std::uint8_t> LefWriter::bytes() const {
    auto align = [](std::uint64_t v) {
        return (v + LefFile::kAlignment - 1) / LefFile::kAlignment * LefFile::kAlignment;
    };
    std::vector<std::uint8_t> out(LefFile::kHeaderBytes, 0);
    auto put = [&](auto v) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
        out.insert(out.end(), p, p + sizeof v);
    };
    const std::uint64_t meta_off = out.size();
    // resize + copy rather than a range insert: GCC 12 warns (-Warray-bounds,
    // a false positive) on inserting a string's range into this vector.
    out.resize(meta_off + metadata_.size());
    std::copy(metadata_.begin(), metadata_.end(),
              out.begin() + static_cast<std::ptrdiff_t>(meta_off));
    const std::uint64_t index_off = out.size();
    std::uint64_t offset = 0;
    bool f16 = false;
    for (const auto& e : entries_) {
        put(static_cast<std::uint16_t>(e.info.name.size()));
        out.insert(out.end(), e.info.name.begin(), e.info.name.end());
        put(static_cast<std::uint8_t>(e.info.dtype));
        put(static_cast<std::uint8_t>(e.info.shape.size()));
        for (auto d : e.info.shape) put(d);
        put(offset);
        put(static_cast<std::uint64_t>(e.data.size()));
        put(crc(e.data));
        offset = align(offset + e.data.size());
        f16 |= e.info.dtype == LefDtype::F16;
    }
    const std::uint64_t data_off = align(out.size());
    out.resize(static_cast<std::size_t>(data_off), 0);
    for (const auto& e : entries_) {
        out.insert(out.end(), e.data.begin(), e.data.end());
        out.resize(static_cast<std::size_t>(align(out.size())), 0);
    }
    std::memcpy(out.data(), LefFile::kMagic, 8);
    auto set = [&](std::size_t at, auto v) { std::memcpy(out.data() + at, &v, sizeof v); };
    set(8, LefFile::kVersion);
    set(12, static_cast<std::uint32_t>(f16 ? 1 : 0));
    set(16, meta_off);
    set(24, static_cast<std::uint64_t>(metadata_.size()));
    set(32, index_off);
    set(40, static_cast<std::uint64_t>(entries_.size()));
    set(48, data_off);
    set(56, crc(out));  // computed with the checksum field still zero
    return out;
}

void LefWriter::write(const std::string& path) const {
    const auto b = bytes();
    const std::string tmp = partial_path(path);
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!f) throw Error("cannot write '" + path + "': " + std::strerror(errno));
        f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        if (!f) {
            std::remove(tmp.c_str());
            throw Error("writing '" + path + "' failed");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error("cannot write '" + path + "': " + std::strerror(errno));
    }
}

}  // namespace etude::engine
