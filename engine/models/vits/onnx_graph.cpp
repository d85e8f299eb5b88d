#include "engine/models/vits/onnx_graph.h"

#include <cstring>
#include <fstream>
#include <limits>

#include "engine/error.h"

namespace etude::engine {

namespace {

// Field numbers from onnx.proto (ONNX IR version 8; stable since 2017).
namespace model_field {
constexpr int ir_version = 1, producer_name = 2, graph = 7, opset_import = 8;
}
namespace opset_field {
constexpr int domain = 1, version = 2;
}
namespace graph_field {
constexpr int node = 1, initializer = 5, input = 11, output = 12;
}
namespace node_field {
constexpr int input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7;
}
namespace attribute_field {
constexpr int name = 1, f = 2, i = 3, s = 4, t = 5, floats = 7, ints = 8, type = 20;
}
namespace tensor_field {
constexpr int dims = 1, data_type = 2, float_data = 4, int32_data = 5, int64_data = 7, name = 8,
              raw_data = 9, double_data = 10, data_location = 14;
}
namespace value_info_field {
constexpr int name = 1, type = 2;
}
constexpr int type_proto_tensor = 1, tensor_type_elem_type = 1;

enum WireType { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

// A cursor over one protobuf message. Every read checks the bytes left and
// throws (the caller adds the file name) rather than reading past the end.
class Wire {
  public:
    explicit Wire(std::span<const std::uint8_t> bytes)
        : p_(bytes.data()), end_(p_ + bytes.size()) {}

    bool done() const { return p_ == end_; }

    std::uint64_t varint() {
        std::uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p_ == end_) throw Error("truncated (a number runs past the end of its message)");
            const std::uint8_t byte = *p_++;
            value |= std::uint64_t(byte & 0x7f) << shift;
            if (!(byte & 0x80)) return value;
        }
        throw Error("malformed (a number longer than 10 bytes)");
    }

    // Reads a field key; returns false at the end of the message.
    bool next(int& field, int& wire_type) {
        if (done()) return false;
        const std::uint64_t key = varint();
        field = int(key >> 3);
        wire_type = int(key & 7);
        if (field == 0) throw Error("malformed (field number 0)");
        return true;
    }

    std::span<const std::uint8_t> bytes() {
        const std::uint64_t n = varint();
        if (n > std::uint64_t(end_ - p_))
            throw Error("truncated (a field of " + std::to_string(n) + " bytes has only " +
                        std::to_string(end_ - p_) + " left)");
        std::span<const std::uint8_t> out(p_, std::size_t(n));
        p_ += n;
        return out;
    }

    std::string string() {
        auto b = bytes();
        return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    }

    std::uint32_t fixed32() {
        if (end_ - p_ < 4) throw Error("truncated (a 4-byte value runs past the end)");
        std::uint32_t v;
        std::memcpy(&v, p_, 4);
        p_ += 4;
        return v;
    }

    std::uint64_t fixed64() {
        if (end_ - p_ < 8) throw Error("truncated (an 8-byte value runs past the end)");
        std::uint64_t v;
        std::memcpy(&v, p_, 8);
        p_ += 8;
        return v;
    }

    void skip(int wire_type) {
        switch (wire_type) {
            case Varint:
                varint();
                return;
            case Fixed64:
                fixed64();
                return;
            case Bytes:
                bytes();
                return;
            case Fixed32:
                fixed32();
                return;
            default:
                throw Error("malformed (wire type " + std::to_string(wire_type) +
                            ", which ONNX files do not use)");
        }
    }

  private:
    const std::uint8_t* p_;
    const std::uint8_t* end_;
};

float as_float(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

double as_double(std::uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
}

// Repeated scalars come packed (one length-delimited field) or one per key.
void read_ints(Wire& w, int wire_type, std::vector<std::int64_t>& out) {
    if (wire_type == Bytes) {
        Wire packed(w.bytes());
        while (!packed.done()) out.push_back(std::int64_t(packed.varint()));
    } else if (wire_type == Varint) {
        out.push_back(std::int64_t(w.varint()));
    } else {
        throw Error("malformed (an integer list with wire type " + std::to_string(wire_type) + ")");
    }
}

void read_floats(Wire& w, int wire_type, std::vector<float>& out) {
    if (wire_type == Bytes) {
        auto b = w.bytes();
        if (b.size() % 4)
            throw Error("malformed (a float list whose length is not a multiple of 4)");
        Wire packed(b);
        while (!packed.done()) out.push_back(as_float(packed.fixed32()));
    } else if (wire_type == Fixed32) {
        out.push_back(as_float(w.fixed32()));
    } else {
        throw Error("malformed (a float list with wire type " + std::to_string(wire_type) + ")");
    }
}

void read_doubles(Wire& w, int wire_type, std::vector<float>& out) {
    if (wire_type == Bytes) {
        auto b = w.bytes();
        if (b.size() % 8)
            throw Error("malformed (a double list whose length is not a multiple of 8)");
        Wire packed(b);
        while (!packed.done()) out.push_back(float(as_double(packed.fixed64())));
    } else if (wire_type == Fixed64) {
        out.push_back(float(as_double(w.fixed64())));
    } else {
        throw Error("malformed (a double list with wire type " + std::to_string(wire_type) + ")");
    }
}

void expect(int wire_type, int wanted, const char* what) {
    if (wire_type != wanted)
        throw Error(std::string("malformed (") + what + " has the wrong wire type)");
}

OnnxTensor read_tensor(std::span<const std::uint8_t> bytes) {
    OnnxTensor t;
    std::span<const std::uint8_t> raw;
    bool has_raw = false;
    std::vector<float> float_data;
    std::vector<std::int64_t> int_data;
    Wire w(bytes);
    int field, wt;
    while (w.next(field, wt)) {
        switch (field) {
            case tensor_field::dims:
                read_ints(w, wt, t.dims);
                break;
            case tensor_field::data_type:
                expect(wt, Varint, "a tensor's data type");
                t.data_type = int(w.varint());
                break;
            case tensor_field::float_data:
                read_floats(w, wt, float_data);
                break;
            case tensor_field::double_data:
                read_doubles(w, wt, float_data);
                break;
            case tensor_field::int32_data:
            case tensor_field::int64_data:
                read_ints(w, wt, int_data);
                break;
            case tensor_field::name:
                expect(wt, Bytes, "a tensor's name");
                t.name = w.string();
                break;
            case tensor_field::raw_data:
                expect(wt, Bytes, "a tensor's raw data");
                raw = w.bytes();
                has_raw = true;
                break;
            case tensor_field::data_location:
                expect(wt, Varint, "a tensor's data location");
                if (w.varint() != 0)
                    throw Error("tensor '" + t.name +
                                "' keeps its data in an external file, which is not supported");
                break;
            default:
                w.skip(wt);
        }
    }
    for (auto d : t.dims)
        if (d < 0) throw Error("tensor '" + t.name + "' has a negative dimension");
    const std::size_t n = t.elements();
    const auto mismatch = [&](std::size_t have) {
        return Error("tensor '" + t.name + "' holds " + std::to_string(have) +
                     " values for a shape of " + std::to_string(n));
    };
    if (t.data_type == int(OnnxType::Float) || t.data_type == int(OnnxType::Double)) {
        const std::size_t width = t.data_type == int(OnnxType::Float) ? 4 : 8;
        if (has_raw) {
            if (raw.size() != n * width) throw mismatch(raw.size() / width);
            t.floats.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                if (width == 4) {
                    std::uint32_t bits;
                    std::memcpy(&bits, raw.data() + 4 * i, 4);
                    t.floats[i] = as_float(bits);
                } else {
                    std::uint64_t bits;
                    std::memcpy(&bits, raw.data() + 8 * i, 8);
                    t.floats[i] = float(as_double(bits));
                }
            }
        } else {
            if (float_data.size() != n) throw mismatch(float_data.size());
            t.floats = std::move(float_data);
        }
    } else if (t.data_type == int(OnnxType::Int64) || t.data_type == int(OnnxType::Int32) ||
               t.data_type == int(OnnxType::Bool)) {
        const std::size_t width = t.data_type == int(OnnxType::Int64)   ? 8
                                  : t.data_type == int(OnnxType::Int32) ? 4
                                                                        : 1;
        if (has_raw) {
            if (raw.size() != n * width) throw mismatch(raw.size() / width);
            t.ints.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                if (width == 8) {
                    std::int64_t v;
                    std::memcpy(&v, raw.data() + 8 * i, 8);
                    t.ints[i] = v;
                } else if (width == 4) {
                    std::int32_t v;
                    std::memcpy(&v, raw.data() + 4 * i, 4);
                    t.ints[i] = v;
                } else {
                    t.ints[i] = raw[i] != 0;
                }
            }
        } else {
            if (int_data.size() != n) throw mismatch(int_data.size());
            t.ints = std::move(int_data);
        }
    }
    return t;
}

OnnxAttribute read_attribute(std::span<const std::uint8_t> bytes) {
    OnnxAttribute a;
    Wire w(bytes);
    int field, wt;
    while (w.next(field, wt)) {
        switch (field) {
            case attribute_field::name:
                expect(wt, Bytes, "an attribute's name");
                a.name = w.string();
                break;
            case attribute_field::f:
                expect(wt, Fixed32, "a float attribute");
                a.f = as_float(w.fixed32());
                break;
            case attribute_field::i:
                expect(wt, Varint, "an integer attribute");
                a.i = std::int64_t(w.varint());
                break;
            case attribute_field::s:
                expect(wt, Bytes, "a string attribute");
                a.s = w.string();
                break;
            case attribute_field::t:
                expect(wt, Bytes, "a tensor attribute");
                a.t = read_tensor(w.bytes());
                break;
            case attribute_field::floats:
                read_floats(w, wt, a.floats);
                break;
            case attribute_field::ints:
                read_ints(w, wt, a.ints);
                break;
            case attribute_field::type:
                expect(wt, Varint, "an attribute's type");
                a.type = int(w.varint());
                break;
            default:
                w.skip(wt);  // subgraphs, strings lists, sparse tensors: not needed
        }
    }
    return a;
}

OnnxNode read_node(std::span<const std::uint8_t> bytes) {
    OnnxNode n;
    Wire w(bytes);
    int field, wt;
    while (w.next(field, wt)) {
        switch (field) {
            case node_field::input:
                expect(wt, Bytes, "a node input");
                n.inputs.push_back(w.string());
                break;
            case node_field::output:
                expect(wt, Bytes, "a node output");
                n.outputs.push_back(w.string());
                break;
            case node_field::name:
                expect(wt, Bytes, "a node name");
                n.name = w.string();
                break;
            case node_field::op_type:
                expect(wt, Bytes, "a node's op type");
                n.op_type = w.string();
                break;
            case node_field::attribute:
                expect(wt, Bytes, "a node attribute");
                n.attributes.push_back(read_attribute(w.bytes()));
                break;
            case node_field::domain:
                expect(wt, Bytes, "a node's domain");
                n.domain = w.string();
                break;
            default:
                w.skip(wt);
        }
    }
    return n;
}

OnnxValueInfo read_value_info(std::span<const std::uint8_t> bytes) {
    OnnxValueInfo v;
    Wire w(bytes);
    int field, wt;
    while (w.next(field, wt)) {
        if (field == value_info_field::name && wt == Bytes) {
            v.name = w.string();
        } else if (field == value_info_field::type && wt == Bytes) {
            Wire type(w.bytes());
            int f2, wt2;
            while (type.next(f2, wt2)) {
                if (f2 == type_proto_tensor && wt2 == Bytes) {
                    Wire tensor(type.bytes());
                    int f3, wt3;
                    while (tensor.next(f3, wt3)) {
                        if (f3 == tensor_type_elem_type && wt3 == Varint)
                            v.elem_type = int(tensor.varint());
                        else
                            tensor.skip(wt3);
                    }
                } else {
                    type.skip(wt2);
                }
            }
        } else {
            w.skip(wt);
        }
    }
    return v;
}

}  // namespace

std::size_t OnnxTensor::elements() const {
    std::size_t n = 1;
    for (auto d : dims) {
        if (d < 0) return 0;
        if (d != 0 && n > std::numeric_limits<std::size_t>::max() / std::size_t(d) / 8)
            throw Error("tensor '" + name + "' is absurdly large");
        n *= std::size_t(d);
    }
    return n;
}

const OnnxAttribute* OnnxNode::attribute(std::string_view attribute_name) const {
    for (const auto& a : attributes)
        if (a.name == attribute_name) return &a;
    return nullptr;
}

std::vector<std::int64_t> OnnxNode::ints(std::string_view attribute_name,
                                         std::vector<std::int64_t> fallback) const {
    const OnnxAttribute* a = attribute(attribute_name);
    return a ? a->ints : fallback;
}

OnnxGraph OnnxGraph::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(path + ": cannot open the file");
    const std::streamoff size = in.tellg();
    if (size < 0) throw Error(path + ": cannot tell the file's size (not a regular file?)");
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) throw Error(path + ": read error");
    return parse(bytes, path);
}

OnnxGraph OnnxGraph::parse(std::span<const std::uint8_t> bytes, const std::string& label) {
    OnnxGraph g;
    g.label_ = label;
    if (bytes.empty()) throw Error(label + ": empty file, not an ONNX model");
    try {
        Wire w(bytes);
        int field, wt;
        bool has_graph = false;
        std::vector<OnnxValueInfo> declared_inputs;
        while (w.next(field, wt)) {
            if (field == model_field::ir_version && wt == Varint) {
                g.ir_version_ = std::int64_t(w.varint());
            } else if (field == model_field::producer_name && wt == Bytes) {
                g.producer_ = w.string();
            } else if (field == model_field::opset_import && wt == Bytes) {
                Wire op(w.bytes());
                std::string domain;
                std::int64_t version = 0;
                int f2, wt2;
                while (op.next(f2, wt2)) {
                    if (f2 == opset_field::domain && wt2 == Bytes)
                        domain = op.string();
                    else if (f2 == opset_field::version && wt2 == Varint)
                        version = std::int64_t(op.varint());
                    else
                        op.skip(wt2);
                }
                if (domain.empty() || domain == "ai.onnx") g.opset_ = version;
            } else if (field == model_field::graph && wt == Bytes) {
                has_graph = true;
                Wire gw(w.bytes());
                int f2, wt2;
                while (gw.next(f2, wt2)) {
                    if (f2 == graph_field::node && wt2 == Bytes)
                        g.nodes_.push_back(read_node(gw.bytes()));
                    else if (f2 == graph_field::initializer && wt2 == Bytes)
                        g.initializers_.push_back(read_tensor(gw.bytes()));
                    else if (f2 == graph_field::input && wt2 == Bytes)
                        declared_inputs.push_back(read_value_info(gw.bytes()));
                    else if (f2 == graph_field::output && wt2 == Bytes)
                        g.outputs_.push_back(read_value_info(gw.bytes()));
                    else
                        gw.skip(wt2);
                }
            } else {
                w.skip(wt);
            }
        }
        if (!has_graph || g.nodes_.empty())
            throw Error("no graph in it: not an ONNX model (or cut short before its graph)");
        for (auto& t : g.initializers_) g.constants_[t.name] = &t;
        for (auto& v : declared_inputs)
            if (!g.constants_.count(v.name)) g.inputs_.push_back(std::move(v));
        g.index();
    } catch (const Error& e) {
        throw Error(label + ": not a readable ONNX model: " + e.what());
    }
    return g;
}

void OnnxGraph::index() {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
        const OnnxNode& n = nodes_[i];
        for (const auto& out : n.outputs) producers_[out] = i;
        if (n.op_type == "Constant" && !n.outputs.empty()) {
            if (const OnnxAttribute* a = n.attribute("value"); a && a->t)
                constants_[n.outputs[0]] = &*a->t;
        }
    }
}

const OnnxTensor* OnnxGraph::constant(const std::string& value) const {
    auto it = constants_.find(value);
    return it == constants_.end() ? nullptr : it->second;
}

const OnnxNode* OnnxGraph::producer_of(const std::string& value) const {
    auto it = producers_.find(value);
    return it == producers_.end() ? nullptr : &nodes_[it->second];
}

}  // namespace etude::engine
