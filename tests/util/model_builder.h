// Helpers that build onnxkit::pb messages in tests: float tensors with raw
// data, tensors pointing at external data, a minimal model holding given
// initializers (inline, above), and graphs built in code (GraphBuilder and
// the type/attribute/node helpers below, in model_builder.cc): typed graph
// inputs and outputs, nodes, initializers, value_info, and subgraphs (If,
// Loop bodies) through graph attributes.
#ifndef ONNXKIT_TESTS_UTIL_MODEL_BUILDER_H_
#define ONNXKIT_TESTS_UTIL_MODEL_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/io/proto.h"

namespace onnxkit::testing {

// The little-endian bytes of `count` floats first, first + 1, ...
inline std::string FloatBytes(int64_t count, float first = 0) {
  std::string bytes(static_cast<size_t>(count) * sizeof(float), '\0');
  for (int64_t i = 0; i < count; ++i) {
    float v = first + static_cast<float>(i);
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
  }
  return bytes;
}

// A FLOAT tensor with `dims` whose raw_data counts up from `first`.
inline pb::TensorProto RawFloatTensor(std::string name, std::vector<int64_t> dims, float first = 0) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  t.dims = std::move(dims);
  t.raw_data = Bytes::Own(FloatBytes(count, first));
  return t;
}

inline pb::StringStringEntryProto Entry(std::string key, std::string value) {
  pb::StringStringEntryProto e;
  e.key = std::move(key);
  e.value = std::move(value);
  return e;
}

// A tensor stored in `location` at `offset` (and `length` when given).
inline pb::TensorProto ExternalTensor(std::string name, std::vector<int64_t> dims, int32_t data_type,
                                      std::string location, int64_t offset = 0,
                                      std::optional<int64_t> length = std::nullopt) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.dims = std::move(dims);
  t.data_type = data_type;
  t.data_location = 1;
  t.external_data.push_back(Entry("location", std::move(location)));
  t.external_data.push_back(Entry("offset", std::to_string(offset)));
  if (length) t.external_data.push_back(Entry("length", std::to_string(*length)));
  return t;
}

// ir_version 9, opset 17, graph "g" with the initializers as outputs.
inline pb::ModelProto MinimalModel(std::vector<pb::TensorProto> initializers = {}) {
  pb::ModelProto m;
  m.ir_version = 9;
  m.producer_name = "onnxkit-test";
  pb::OperatorSetIdProto opset;
  opset.version = 17;
  m.opset_import.push_back(opset);
  pb::GraphProto& g = m.graph.mutable_value();
  g.name = "g";
  for (pb::TensorProto& t : initializers) {
    pb::ValueInfoProto out;
    out.name = t.name;
    g.output.push_back(std::move(out));
    g.initializer.push_back(std::move(t));
  }
  return m;
}

// --- Graphs built in code (model_builder.cc) ---

// A tensor type of `elem_type`; `dims` absent: unknown shape; a dim < 0 is an
// unknown dimension, written as dim_param "d<index>".
pb::TypeProto TensorType(int32_t elem_type, std::optional<std::vector<int64_t>> dims = std::nullopt);
// A value_info entry; untyped when `elem_type` is 0.
pb::ValueInfoProto MakeValueInfo(std::string name, int32_t elem_type = 0,
                                 std::optional<std::vector<int64_t>> dims = std::nullopt);

pb::AttributeProto AttrInt(std::string name, int64_t v);
pb::AttributeProto AttrFloat(std::string name, float v);
pb::AttributeProto AttrString(std::string name, std::string v);
pb::AttributeProto AttrInts(std::string name, std::vector<int64_t> v);
pb::AttributeProto AttrFloats(std::string name, std::vector<float> v);
pb::AttributeProto AttrStrings(std::string name, std::vector<std::string> v);
pb::AttributeProto AttrTensor(std::string name, pb::TensorProto t);
pb::AttributeProto AttrGraph(std::string name, pb::GraphProto g);
pb::AttributeProto AttrGraphs(std::string name, std::vector<pb::GraphProto> graphs);

pb::NodeProto MakeNode(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                       std::vector<pb::AttributeProto> attributes = {}, std::string name = "");

// Builds a GraphProto step by step, in the order of the calls:
//   pb::GraphProto g = GraphBuilder("main")
//       .Input("x", pb::kFloat, {{2, 3}})
//       .Initializer(RawFloatTensor("w", {2, 3}))
//       .Node("Add", {"x", "w"}, {"y"})
//       .Output("y", pb::kFloat, {{2, 3}})
//       .Build();
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "g");
  GraphBuilder& Input(std::string name, int32_t elem_type = pb::kFloat,
                      std::optional<std::vector<int64_t>> dims = std::nullopt);
  GraphBuilder& Output(std::string name, int32_t elem_type = pb::kFloat,
                       std::optional<std::vector<int64_t>> dims = std::nullopt);
  GraphBuilder& ValueInfo(std::string name, int32_t elem_type = pb::kFloat,
                          std::optional<std::vector<int64_t>> dims = std::nullopt);
  GraphBuilder& Initializer(pb::TensorProto tensor);
  GraphBuilder& Node(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                     std::vector<pb::AttributeProto> attributes = {}, std::string name = "");
  // The graph so far, for edits the builder does not cover.
  pb::GraphProto& graph() { return graph_; }
  pb::GraphProto Build() const { return graph_; }

 private:
  pb::GraphProto graph_;
};

// A model around `graph`: ir_version, opset `opset` of ai.onnx.
pb::ModelProto ModelFromGraph(pb::GraphProto graph, int64_t opset = 17, int64_t ir_version = 9);

// A canned model: main graph (c: bool, x: float[2]) -> (y), with
// initializer "w"; y = If(c) then { t = Add(x, w) (outer values) -> t }
// else { e = Neg(x) -> e }.
pb::ModelProto IfModelWithOuterRefs();

// A canned model whose run never ends: main graph (x: float[2]) -> (y),
// y = Loop(no trip count, condition the constant true) { pass x along }.
pb::ModelProto EndlessLoopModel();

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_UTIL_MODEL_BUILDER_H_
