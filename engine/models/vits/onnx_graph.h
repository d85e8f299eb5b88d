// An ONNX model file read into plain structs: the graph's nodes in order,
// its inputs and outputs, and its constant tensors (initializers and the
// outputs of Constant nodes). Enough of ONNX to follow a Piper voice's graph
// and take its weights; nothing here runs a graph.
//
// The reader is written against the protobuf wire format directly (ONNX's
// onnx.proto field numbers) rather than linking libprotobuf and libonnx: a
// model file is untrusted input, and a few hundred lines with every length
// checked against the bytes that remain are easier to trust than a
// dependency every user of the library would then need. Unknown fields are
// skipped, as protobuf does.
//
// Errors: load()/parse() throw etude::Error with one line starting with the
// file name: not a file, truncated, malformed, or a tensor whose data does
// not match its shape. Never a crash, whatever the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace etude::engine {

// TensorProto.DataType values this reader decodes.
enum class OnnxType : int { Float = 1, Int32 = 6, Int64 = 7, Bool = 9, Double = 11 };

struct OnnxTensor {
    std::string name;
    std::vector<std::int64_t> dims;
    int data_type = 0;
    // Decoded values: float and double tensors land in `floats`, integer and
    // bool ones in `ints`; other types keep their shape only.
    std::vector<float> floats;
    std::vector<std::int64_t> ints;

    std::size_t elements() const;
    bool is_float() const { return data_type == 1 || data_type == 11; }
    bool is_integer() const { return data_type == 6 || data_type == 7 || data_type == 9; }
};

struct OnnxAttribute {
    std::string name;
    int type = 0;  // AttributeProto.AttributeType
    float f = 0;
    std::int64_t i = 0;
    std::string s;
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::optional<OnnxTensor> t;
};

struct OnnxNode {
    std::string op_type;
    std::string name;
    std::string domain;
    std::vector<std::string> inputs;  // "" for an omitted optional input
    std::vector<std::string> outputs;
    std::vector<OnnxAttribute> attributes;

    const OnnxAttribute* attribute(std::string_view attribute_name) const;
    // The attribute's ints (e.g. "dilations"), or `fallback` when absent.
    std::vector<std::int64_t> ints(std::string_view attribute_name,
                                   std::vector<std::int64_t> fallback = {}) const;
};

struct OnnxValueInfo {
    std::string name;
    int elem_type = 0;  // 0 when the file does not say
};

class OnnxGraph {
  public:
    // Movable, not copyable: the constant index points into the graph.
    OnnxGraph(OnnxGraph&&) = default;
    OnnxGraph& operator=(OnnxGraph&&) = default;
    OnnxGraph(const OnnxGraph&) = delete;
    OnnxGraph& operator=(const OnnxGraph&) = delete;

    static OnnxGraph load(const std::string& path);
    // `label` names the source in errors (a path, usually).
    static OnnxGraph parse(std::span<const std::uint8_t> bytes, const std::string& label);

    const std::string& label() const { return label_; }
    const std::string& producer() const { return producer_; }
    std::int64_t ir_version() const { return ir_version_; }
    // Opset of the default ("" or "ai.onnx") domain; 0 if not declared.
    std::int64_t opset() const { return opset_; }
    const std::vector<OnnxNode>& nodes() const { return nodes_; }
    // Graph inputs that are not initializers (older exporters list both).
    const std::vector<OnnxValueInfo>& inputs() const { return inputs_; }
    const std::vector<OnnxValueInfo>& outputs() const { return outputs_; }
    // The constant behind a value name: an initializer or a Constant node's
    // output; null when the value is computed at run time.
    const OnnxTensor* constant(const std::string& value) const;
    // The node that produces a value; null for graph inputs and initializers.
    const OnnxNode* producer_of(const std::string& value) const;

  private:
    OnnxGraph() = default;
    std::string label_;
    std::string producer_;
    std::int64_t ir_version_ = 0;
    std::int64_t opset_ = 0;
    std::vector<OnnxNode> nodes_;
    std::vector<OnnxValueInfo> inputs_;
    std::vector<OnnxValueInfo> outputs_;
    std::vector<OnnxTensor> initializers_;
    std::unordered_map<std::string, const OnnxTensor*> constants_;
    std::unordered_map<std::string, std::size_t> producers_;

    void index();
};

}  // namespace etude::engine
