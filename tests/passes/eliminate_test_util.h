// Small helpers shared by the tests of the eliminate and merge passes (dce,
// eliminate-identity, cse, dedupe-initializers, merge-*, prune-inputs).
#ifndef ONNXKIT_TESTS_PASSES_ELIMINATE_TEST_UTIL_H_
#define ONNXKIT_TESTS_PASSES_ELIMINATE_TEST_UTIL_H_

#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "lib/io/proto.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/model_builder.h"
#include "tests/util/tensors.h"

namespace onnxkit::testing {

// Runs `passes` over `model`; a failure is a test failure (and an empty
// result).
inline PassResult RunOrFail(const pb::ModelProto& model, std::string_view passes) {
  absl::StatusOr<PassResult> r = RunPasses(model, passes);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return PassResult{};
  EXPECT_TRUE(r->report.failures.empty()) << r->report.failures.front().message;
  return *std::move(r);
}

// The graph output names of the main graph, in order.
inline std::vector<std::string> OutputNames(const pb::ModelProto& model) {
  std::vector<std::string> names;
  if (model.graph) {
    for (const pb::ValueInfoProto& v : model.graph->output) names.push_back(v.name);
  }
  return names;
}

// A second run of `passes` over an already optimized model changes nothing.
inline void ExpectFixedPoint(const pb::ModelProto& model, std::string_view passes) {
  PassResult again = RunOrFail(model, passes);
  EXPECT_EQ(again.rewrites, 0) << "a second run of " << passes << " still rewrote";
}

// `body` with every name it defines (node outputs, initializers, node
// names) suffixed, so that it can sit beside the original.
inline pb::GraphProto WithSuffix(pb::GraphProto body, const std::string& suffix) {
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

// The model `main` wraps in both branches of an If on a bool input "c":
// main(c, inputs...) -> (outputs...), then/else bodies are `body` (which
// reads the inputs from outer scope and returns `body_output`), and the If's
// output is "y".
inline pb::ModelProto InIf(pb::GraphProto body, const std::string& body_output,
                           const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs,
                           std::vector<int64_t> out_dims, int64_t opset = 17) {
  body.output.clear();
  body.output.push_back(MakeValueInfo(body_output, pb::kFloat, out_dims));
  body.input.clear();
  GraphBuilder main("main");
  main.Input("c", pb::kBool, std::vector<int64_t>{});
  for (const auto& [name, dims] : inputs) main.Input(name, pb::kFloat, dims);
  pb::GraphProto else_body = WithSuffix(body, "_else");
  else_body.name = "else";
  body.name = "then";
  main.Node("If", {"c"}, {"y"}, {AttrGraph("then_branch", std::move(body)), AttrGraph("else_branch", else_body)},
            "if");
  main.Output("y", pb::kFloat, std::move(out_dims));
  return ModelFromGraph(main.Build(), opset);
}

}  // namespace onnxkit::testing

#endif  // ONNXKIT_TESTS_PASSES_ELIMINATE_TEST_UTIL_H_
