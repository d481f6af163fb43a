// Helpers for the inference tests: run inference on a model built in code
// and read back one value's type ("float[2, N, ?]") or the issues
// ("E0601 graph 'g' › node 'r' (Reshape): Reshape: cannot reshape ...").
#ifndef ONNXKIT_TESTS_LIB_INFER_INFER_TEST_UTIL_H_
#define ONNXKIT_TESTS_LIB_INFER_INFER_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/infer/engine.h"
#include "lib/infer/infer.h"
#include "lib/infer/types.h"
#include "lib/base/data_type.h"
#include "lib/base/strings.h"
#include "lib/io/proto.h"
#include "tests/util/model_builder.h"

namespace onnxkit::infer::testing {

using ::onnxkit::testing::AttrFloat;
using ::onnxkit::testing::AttrGraph;
using ::onnxkit::testing::AttrInt;
using ::onnxkit::testing::AttrInts;
using ::onnxkit::testing::AttrString;
using ::onnxkit::testing::AttrTensor;
using ::onnxkit::testing::GraphBuilder;
using ::onnxkit::testing::MakeNode;
using ::onnxkit::testing::ModelFromGraph;

// "float[2, N, ?]": element type and shape; "float?" for an unknown rank,
// "?" for a value inference knows nothing about, "seq(tensor(float))" for
// non-tensors.
inline std::string Describe(const pb::TypeProto& proto) {
  Type t = TypeFromProto(proto);
  if (t.unknown()) return "?";
  if (!t.is_tensor()) return TypeName(t);
  std::string elem = t.elem_type == 0 ? "?" : std::string(DataTypeName(t.elem_type));
  return t.shape ? absl::StrCat(elem, DimsToString(t.shape)) : elem + "?";
}

// The inferred type of `value` in `model`, described as above.
inline std::string TypeOf(const pb::ModelProto& model, const std::string& value) {
  std::map<std::string, pb::TypeProto> types = InferredTypes(model);
  auto it = types.find(value);
  return it == types.end() ? "(absent)" : Describe(it->second);
}

// Every issue as "E0601 <location>: <message>".
inline std::vector<std::string> Issues(const pb::ModelProto& model) {
  std::vector<std::string> out;
  for (const InferenceIssue& i : InferModel(model)) {
    out.push_back(absl::StrCat(Sv(IssueCode(i.rule)), " ", i.location, ": ", i.message));
  }
  return out;
}

// A model with one node `op` over typed graph inputs; its outputs are left
// undeclared so that inference alone types them.
struct OneNode {
  std::string op;
  std::vector<pb::ValueInfoProto> inputs;
  std::vector<std::string> outputs = {"y"};
  std::vector<pb::AttributeProto> attributes;
  std::vector<pb::TensorProto> initializers;
  // The node's inputs; empty: the graph inputs, then the initializers.
  std::vector<std::string> node_inputs;
  int64_t opset = 21;
  std::string domain;
};

inline pb::ModelProto Build(const OneNode& spec) {
  GraphBuilder b("g");
  std::vector<std::string> names;
  for (const pb::ValueInfoProto& vi : spec.inputs) {
    b.graph().input.push_back(vi);
    names.push_back(vi.name);
  }
  for (const pb::TensorProto& t : spec.initializers) {
    b.Initializer(t);
    names.push_back(t.name);
  }
  b.Node(spec.op, spec.node_inputs.empty() ? names : spec.node_inputs, spec.outputs, spec.attributes, "n");
  b.graph().node.back().domain = spec.domain;
  for (const std::string& o : spec.outputs) {
    if (!o.empty()) b.graph().output.push_back(::onnxkit::testing::MakeValueInfo(o));
  }
  pb::ModelProto m = ModelFromGraph(b.Build(), spec.opset);
  if (!spec.domain.empty()) {
    pb::OperatorSetIdProto op;
    op.domain = spec.domain;
    op.version = spec.domain == "ai.onnx.ml" ? 5 : 1;
    m.opset_import.push_back(op);
  }
  return m;
}

// A graph input "name" of `elem_type` and `dims` (a dim < 0 is symbolic "d<i>").
inline pb::ValueInfoProto In(std::string name, std::vector<int64_t> dims, int32_t elem_type = pb::kFloat) {
  return ::onnxkit::testing::MakeValueInfo(std::move(name), elem_type, std::move(dims));
}

// An int64 initializer holding `values` (rank 1, or a scalar when `scalar`).
inline pb::TensorProto Ints(std::string name, std::vector<int64_t> values, bool scalar = false) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kInt64;
  if (!scalar) t.dims = {static_cast<int64_t>(values.size())};
  t.int64_data = std::move(values);
  return t;
}

// A float initializer holding `values` (rank 1).
inline pb::TensorProto Floats(std::string name, std::vector<float> values) {
  pb::TensorProto t;
  t.name = std::move(name);
  t.data_type = pb::kFloat;
  t.dims = {static_cast<int64_t>(values.size())};
  t.float_data = std::move(values);
  return t;
}

// The type of output `value` of the single node `spec`.
inline std::string Infer(const OneNode& spec, const std::string& value = "y") { return TypeOf(Build(spec), value); }
inline std::vector<std::string> IssuesOf(const OneNode& spec) { return Issues(Build(spec)); }

}  // namespace onnxkit::infer::testing

#endif  // ONNXKIT_TESTS_LIB_INFER_INFER_TEST_UTIL_H_
