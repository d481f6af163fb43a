// Small helpers shared by the tests of the fuse-* passes: running a pass
// that must succeed, checking that it changed nothing or reaches a fixed
// point, constants as initializers, and a pattern wrapped in both branches
// of an If.
#ifndef ONNXKIT_TESTS_PASSES_FUSE_TEST_UTIL_H_
#define ONNXKIT_TESTS_PASSES_FUSE_TEST_UTIL_H_

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/proto.h"
#include "runner/reference/float_types.h"
#include "runner/tensor.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"

namespace onnxkit::testing::fuse {

// Runs `passes` over `model`, expecting success and no failed rewrite.
inline PassResult Run(const pb::ModelProto& model, std::string_view passes) {
  absl::StatusOr<PassResult> r = RunPasses(model, passes);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return PassResult{};
  EXPECT_TRUE(r->report.failures.empty()) << r->report.failures.front().message;
  return *std::move(r);
}

// The pass applies no rewrite and leaves every node in place.
inline void ExpectNoChange(const pb::ModelProto& model, std::string_view passes) {
  PassResult r = Run(model, passes);
  EXPECT_EQ(r.rewrites, 0) << passes << " rewrote";
  EXPECT_EQ(NodeCount(r.model), NodeCount(model));
}

// A second run over the result changes nothing.
inline void ExpectFixedPoint(const pb::ModelProto& model, std::string_view passes) {
  EXPECT_EQ(Run(model, passes).rewrites, 0) << "a second run of " << passes << " still rewrote";
}

// A float tensor of `shape` holding `values` (repeated cyclically).
inline runner::Tensor FloatValues(std::vector<int64_t> shape, const std::vector<float>& values) {
  runner::Tensor t = *runner::Tensor::Allocate(pb::kFloat, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) {
    t.mutable_data<float>()[i] = values[static_cast<size_t>(i) % values.size()];
  }
  return t;
}
// An int64 tensor of `shape` holding `values`.
inline runner::Tensor Ints(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  runner::Tensor t = *runner::Tensor::Allocate(pb::kInt64, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.mutable_data<int64_t>()[i] = values[static_cast<size_t>(i)];
  return t;
}
// A float tensor converted to float16 or double (other types: unchanged).
inline runner::Tensor ConvertFloats(const runner::Tensor& t, int32_t dtype) {
  if (dtype != pb::kFloat16 && dtype != pb::kDouble) return t;
  runner::Tensor out = *runner::Tensor::Allocate(dtype, t.shape());
  for (int64_t i = 0; i < t.size(); ++i) {
    float v = t.data<float>()[i];
    if (dtype == pb::kDouble) {
      out.mutable_data<double>()[i] = v;
    } else {
      out.mutable_data<runner::Float16>()[i] = runner::Float16(v);
    }
  }
  return out;
}
inline runner::Tensor TrueScalar() { return runner::Tensor::Scalar<uint8_t>(pb::kBool, 1); }
inline runner::Tensor FalseScalar() { return runner::Tensor::Scalar<uint8_t>(pb::kBool, 0); }

// `body` with every name it defines suffixed, so a copy can sit beside it.
inline pb::GraphProto Suffixed(pb::GraphProto body, const std::string& suffix) {
  std::set<std::string> defined;
  for (const pb::TensorProto& t : body.initializer) defined.insert(t.name);
  for (const pb::NodeProto& n : body.node) defined.insert(n.output.begin(), n.output.end());
  auto rename = [&](std::string& name) {
    if (defined.count(name)) name += suffix;
  };
  for (pb::TensorProto& t : body.initializer) rename(t.name);
  for (pb::NodeProto& n : body.node) {
    for (std::string& in : n.input) rename(in);
    for (std::string& out : n.output) rename(out);
    if (!n.name.empty()) n.name += suffix;
  }
  for (pb::ValueInfoProto& v : body.output) rename(v.name);
  for (pb::ValueInfoProto& v : body.value_info) rename(v.name);
  return body;
}

// main(c: bool, x: float[x_dims]) -> (if_out: float[y_dims]) = If(c) with
// `body` (reading x from outer scope, returning `body_output`) in both
// branches.
inline pb::ModelProto InIf(pb::GraphProto body, const std::string& body_output, std::vector<int64_t> x_dims,
                           std::vector<int64_t> y_dims, int64_t opset) {
  body.input.clear();
  body.output.clear();
  body.output.push_back(MakeValueInfo(body_output, pb::kFloat, y_dims));
  pb::GraphProto else_body = Suffixed(body, "_else");
  else_body.name = "else";
  body.name = "then";
  GraphBuilder main("main");
  main.Input("c", pb::kBool, std::vector<int64_t>{})
      .Input("x", pb::kFloat, std::move(x_dims))
      .Node("If", {"c"}, {"if_out"},
            {AttrGraph("then_branch", std::move(body)), AttrGraph("else_branch", else_body)}, "if")
      .Output("if_out", pb::kFloat, std::move(y_dims));
  return ModelFromGraph(main.Build(), opset);
}

}  // namespace onnxkit::testing::fuse

#endif  // ONNXKIT_TESTS_PASSES_FUSE_TEST_UTIL_H_
